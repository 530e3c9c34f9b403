"""One GRPO step, top to bottom: sample G per prompt, score, group advantages, several clipped passes.

GRPO is on-policy: the batch is sampled by the current policy, used for `passes` updates, then
thrown away. Pass 1 sees ratio == 1 exactly (the policy has not moved yet); later passes see the
policy drift from pi_old, which is where clipping starts to bite.
"""

from __future__ import annotations

import time

import torch

from trainer.objective import grpo_loss, group_advantages
from trainer.records import TokenStats, reward_scalars, sample_rows, token_rows
from trainer.rollout import token_logprobs
from trainer.scoring import collect_batch
from trainer.setup import Components


def minibatch_indices(batch: int, minibatches: int) -> list[torch.Tensor]:
    order = torch.randperm(batch) if minibatches > 1 else torch.arange(batch)
    return [chunk for chunk in order.chunk(minibatches) if chunk.numel()]


def grpo_step(c: Components, step: int) -> dict[str, float]:
    cfg = c.cfg
    G = cfg.group_size
    start = time.perf_counter()

    # --- sample G completions per prompt from pi_old, score, then the group is the baseline ---
    rows, rollout, mask, scores, totals, old_logp, entropy, ref_logp = collect_batch(c, step)
    groups = group_advantages(totals.view(-1, G), cfg.std_mode)  # A_i = (r_i - mean) / std
    advantages = groups.advantages.flatten().to(c.device)

    # --- several clipped passes over the same batch ---
    stats = TokenStats()
    last = {k: torch.zeros_like(old_logp) for k in ("logp_new", "ratio", "kl")}
    last_low = torch.zeros_like(mask, dtype=torch.bool)
    last_high = torch.zeros_like(mask, dtype=torch.bool)
    losses, policy_losses, grad_norms = [], [], []
    for _ in range(cfg.passes):
        for idx in minibatch_indices(len(rollout.completions), cfg.minibatches):
            sub = rollout.select(idx)
            logp, _ = token_logprobs(c.policy, sub, cfg.temperature)
            out = grpo_loss(logp, old_logp[idx], None if ref_logp is None else ref_logp[idx], advantages[idx],
                            mask[idx], cfg.epsilon, cfg.epsilon_upper, cfg.beta, cfg.loss_aggregation)
            c.optimizer.zero_grad(set_to_none=True)
            out.loss.backward()
            grad_norms.append(float(torch.nn.utils.clip_grad_norm_(
                c.policy.parameters(), cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf"))))
            c.optimizer.step()
            stats.add(out.ratio, out.kl, out.clipped_low, out.clipped_high, mask[idx])
            losses.append(out.loss.item())
            policy_losses.append(out.policy_loss.item())
            last["logp_new"][idx], last["ratio"][idx], last["kl"][idx] = logp.detach(), out.ratio.detach(), out.kl.detach()
            last_low[idx], last_high[idx] = out.clipped_low, out.clipped_high

    # --- log ---
    step_s = time.perf_counter() - start
    n_tokens = int(mask.sum())
    metrics = reward_scalars(totals, scores.per_reward, scores.errors, groups.zero_std.float().mean().item(),
                             groups.advantages.flatten())
    metrics.update(stats.scalars())
    metrics.update({
        "entropy/mean": float((entropy * mask).sum() / mask.sum().clamp(min=1)),
        "loss/policy": sum(policy_losses) / len(policy_losses),
        "loss/total": sum(losses) / len(losses),
        "grad/norm": sum(grad_norms) / len(grad_norms),
        "lr": c.optimizer.param_groups[0]["lr"],
        "completion/length_mean": rollout.lengths.float().mean().item(),
        "completion/length_max": rollout.lengths.max().item(),
        "completion/truncated_frac": rollout.truncated.float().mean().item(),
        "time/step_s": step_s,
        "time/generation_s": rollout.generation_s,
        "perf/tokens_per_s": n_tokens / step_s,
    })
    if c.writer.level == "full":
        c.writer.log("samples", sample_rows(
            step, rows, G, rollout.completions, totals, scores.per_reward, groups.advantages.flatten(),
            rollout.lengths, rollout.truncated, last["ratio"], last_low | last_high, last["kl"], mask))
        c.writer.log("histograms", stats.histogram(step, cfg.epsilon, cfg.epsilon_upper))
        which = list(range(min(cfg.token_detail_groups, cfg.prompts_per_step) * G))
        if which:
            per_token = {
                "logp_new": last["logp_new"], "logp_old": old_logp,
                "logp_ref": ref_logp if ref_logp is not None else torch.full_like(old_logp, float("nan")),
                "ratio": last["ratio"], "kl": last["kl"], "clipped_low": last_low, "clipped_high": last_high,
                "advantage": advantages[:, None].expand_as(old_logp),
            }
            c.writer.log("tokens", token_rows(step, rows, G, which, c.tokenizer, rollout.completion_ids,
                                              rollout.completion_mask, per_token))
    return metrics
