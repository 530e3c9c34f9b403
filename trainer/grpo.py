"""One GRPO step, top to bottom: sample G per prompt, score, group advantages, several clipped passes.

GRPO is on-policy: the batch is sampled by the current policy, used for `passes` updates, then
thrown away. Pass 1 sees ratio == 1 exactly (the policy has not moved yet); later passes see the
policy drift from pi_old, which is where clipping starts to bite.
"""

from __future__ import annotations

import time

import torch

from trainer.objective import grpo_loss, group_advantages
from trainer.records import LastPass, TokenStats, log_step_tables, step_scalars
from trainer.rollout import token_logprobs
from trainer.scoring import collect_batch, minibatch_indices
from trainer.setup import Components


def grpo_step(c: Components, step: int) -> dict[str, float]:
    cfg = c.cfg
    start = time.perf_counter()

    # --- sample G completions per prompt from pi_old, score, then the group is the baseline ---
    batch = collect_batch(c, step)
    groups = group_advantages(batch.totals.view(-1, cfg.group_size), cfg.std_mode)  # A_i = (r_i - mean) / std
    advantages = groups.advantages.flatten().to(c.device)

    # --- several clipped passes over the same batch ---
    stats, last = TokenStats(), LastPass.like(batch.old_logp)
    losses, policy_losses, grad_norms = [], [], []
    for _ in range(cfg.passes):
        for idx in minibatch_indices(len(batch.rollout.completions), cfg.minibatches):
            logp, _ = token_logprobs(c.policy, batch.rollout.select(idx), cfg.temperature)
            out = grpo_loss(
                logp=logp, old_logp=batch.old_logp[idx],
                ref_logp=None if batch.ref_logp is None else batch.ref_logp[idx],
                advantages=advantages[idx], mask=batch.mask[idx], eps_low=cfg.epsilon, eps_high=cfg.epsilon_upper,
                beta=cfg.beta, aggregation=cfg.loss_aggregation)
            c.optimizer.zero_grad(set_to_none=True)
            out.loss.backward()
            grad_norms.append(float(torch.nn.utils.clip_grad_norm_(
                c.policy.parameters(), cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf"))))
            c.optimizer.step()
            stats.add(out.ratio, out.kl, out.clipped_low, out.clipped_high, batch.mask[idx])
            losses.append(out.loss.item())
            policy_losses.append(out.policy_loss.item())
            last.record(idx, logp=logp, ratio=out.ratio, kl=out.kl, clipped_low=out.clipped_low,
                        clipped_high=out.clipped_high)

    # --- log ---
    metrics = step_scalars(c, batch, stats, advantages=groups.advantages.flatten(),
                           frac_zero_std=groups.zero_std.float().mean().item(), policy_losses=policy_losses,
                           losses=losses, grad_norms=grad_norms, start=start)
    log_step_tables(c, step, batch, stats, last, advantages=groups.advantages.flatten(),
                    per_token={"advantage": advantages[:, None].expand_as(batch.old_logp)})
    return metrics
