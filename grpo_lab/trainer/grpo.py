"""One GRPO step, top to bottom: sample G per prompt, score, group advantages, several clipped passes.

GRPO is on-policy: the batch is sampled by the current policy, used for `passes` updates, then
thrown away. Pass 1 sees ratio == 1 exactly (the policy has not moved yet); later passes see the
policy drift from pi_old, which is where clipping starts to bite.

The variants are options of the same loop (docs: README, "GRPO as the chapter defines it"):
dynamic sampling replaces the groups with no spread before anything else happens; the others are
keywords of `grpo_loss` (token / sequence ratio, normaliser, truncated masking, entropy bonus).
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from grpo_lab.trainer.distributed import Dist
from grpo_lab.objective.functions import GroupAdvantages, group_advantages, grpo_loss, masked_mean
from grpo_lab.trainer.records import LastPass, TokenStats, Updates, log_step_tables, step_scalars
from grpo_lab.trainer.rollout import token_logprobs
from grpo_lab.trainer.scoring import collect_batch, collect_with_signal, minibatch_indices
from grpo_lab.trainer.setup import Components


def grpo_step(c: Components, step: int) -> dict[str, float]:
    cfg = c.cfg
    start = time.perf_counter()
    # one pass over one minibatch: pi_old is that update's own forward, detached (no second forward)
    reuse_first_pass = cfg.passes == 1 and cfg.minibatches == 1 and not cfg.dynamic_sampling

    # --- sample G completions per prompt from pi_old, score, then the group is the baseline ---
    if cfg.dynamic_sampling:  # groups with equal rewards are replaced by more prompts (DAPO)
        dynamic = collect_with_signal(c, step)
        batch, sampled, rounds = dynamic.kept, dynamic.sampled, dynamic.rounds
    else:
        batch = sampled = collect_batch(c, step, policy_logprobs=not reuse_first_pass)
        dynamic, rounds = None, 1
    # A_i = (r_i - mean) / std; several processes: std_mode batch takes the std of the whole step
    groups = global_group_advantages(c.dist, batch.totals.view(-1, batch.group_size), cfg.std_mode)
    advantages = groups.advantages.flatten().to(c.device)
    truncated = batch.rollout.truncated if cfg.mask_truncated else None

    # --- several clipped passes over the same batch ---
    stats, last = TokenStats(), LastPass.like(batch.old_logp)
    updates, bonuses = Updates(), []
    for _ in range(cfg.passes if batch.rows else 0):  # dynamic sampling may leave no group to train on
        for idx in minibatch_indices(len(batch.rollout.completions), cfg.minibatches):
            c.timer.count("update", batch.mask[idx].sum())
            with c.timer.phase("update"):
                logp, entropy = token_logprobs(c.policy, batch.rollout.select(idx), cfg.temperature,
                                               with_entropy=reuse_first_pass, entropy_grad=cfg.entropy_coef > 0)
                if reuse_first_pass:  # the same numbers a separate no-grad forward gives, bit for bit
                    batch.old_logp, batch.entropy = logp.detach(), entropy.detach()
                out = grpo_loss(
                    logp=logp, old_logp=batch.old_logp[idx],
                    ref_logp=None if batch.ref_logp is None else batch.ref_logp[idx],
                    advantages=advantages[idx], mask=batch.mask[idx], settings=cfg.loss_settings,
                    truncated=None if truncated is None else truncated[idx], entropy=entropy)
                # several processes: the gradient average across them is the whole batch's gradient
                scale = loss_scale(c.dist, out.loss_mask, cfg.loss_aggregation)  # 1 on one process
                c.optimizer.zero_grad(set_to_none=True)
                (out.loss * scale).backward()
                grad_norm = float(torch.nn.utils.clip_grad_norm_(
                    c.policy.parameters(), cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf")))
                c.optimizer.step()
            stats.add(out.ratio, out.kl, out.clipped_low, out.clipped_high, batch.mask[idx])
            updates.add(out.loss.item() * scale, out.policy_loss.item() * scale, grad_norm)
            bonuses.append(cfg.entropy_coef * out.entropy.item() * scale)
            last.record(idx, logp=logp, ratio=out.ratio, kl=out.kl, clipped_low=out.clipped_low,
                        clipped_high=out.clipped_high)

    # --- log: per-completion figures describe everything sampled, as tables/samples does ---
    if dynamic is None:
        logged_adv, frac_zero_std = groups.advantages.flatten(), groups.zero_std.float().mean().item()
    else:
        n_dropped = len(dynamic.dropped.rows)
        logged_adv = torch.cat([groups.advantages.flatten(), torch.zeros(n_dropped * batch.group_size)])
        frac_zero_std = n_dropped / (len(batch.rows) + n_dropped)  # every kept group has a spread
    metrics = step_scalars(c, sampled, stats, updates, advantages=logged_adv, frac_zero_std=frac_zero_std,
                           start=start)
    metrics.update({"groups/kept": float(len(batch.rows)), "groups/dropped": float(len(sampled.rows) - len(batch.rows)),
                    "groups/sampling_rounds": float(rounds)})
    if dynamic is not None:  # the entropy of the trained groups: the dropped ones had no forward pass
        metrics.pop("entropy/mean")
        if batch.rows:
            metrics["entropy/mean"] = float(masked_mean(batch.entropy, batch.mask))
    if bonuses:
        metrics["loss/entropy_bonus"] = sum(bonuses) / len(bonuses)
    log_step_tables(c, step, batch, stats, last, advantages=groups.advantages.flatten(),
                    per_token={"advantage": advantages[:, None].expand_as(batch.old_logp)},
                    dropped=dynamic.dropped if dynamic else None)
    return metrics


# --- several processes: each holds a share of the step's groups; these make the share's numbers the
# global batch's (on one process they are the plain computation) ---


def global_group_advantages(d: Dist, rewards: torch.Tensor, std_mode: str) -> GroupAdvantages:
    """objective.group_advantages of this process's groups (N, G), as computed over the global batch:
    the same numbers locally, except std_mode batch, whose std is over every process's rewards."""
    if not d.active or std_mode != "batch":
        return group_advantages(rewards, std_mode)
    whole = group_advantages(d.all_gather_tensor(rewards), std_mode)
    rows = slice(d.rank * rewards.shape[0], (d.rank + 1) * rewards.shape[0])
    return GroupAdvantages(whole.advantages[rows], whole.mean[rows], whole.std[rows], whole.zero_std[rows])


def loss_scale(d: Dist, loss_mask: torch.Tensor, aggregation: str) -> float:
    """The factor on this process's loss that makes the processes' gradient average the gradient of
    the global batch's loss: world_size * local denominator / global denominator (1 on one process)."""
    if not d.active:
        return 1.0
    if aggregation == "sequence":  # responses with at least one token in the loss
        local = float((loss_mask.sum(dim=1) > 0).sum())
    elif aggregation == "token":
        local = float(loss_mask.sum())
    else:  # constant: responses x max_new_tokens, the same on every process
        local = float(loss_mask.shape[0])
    total = d.all_reduce([local], dist.ReduceOp.SUM)[0]
    return d.world_size * local / total if total > 0 else 0.0
