"""One GRPO step, top to bottom: sample G per prompt, score, group advantages, several clipped passes.

GRPO is on-policy: the batch is sampled by the current policy, used for `passes` updates, then
thrown away. Pass 1 sees ratio == 1 exactly (the policy has not moved yet); later passes see the
policy drift from pi_old, which is where clipping starts to bite.

The variants are options of the same loop (docs: README, "GRPO as the chapter defines it"):
dynamic sampling replaces the groups with no spread before anything else happens; the others are
keywords of `grpo_loss` (token / sequence ratio, normaliser, truncated masking, entropy bonus).

Each stage is a module of its own, called in the order the chapter draws them: sampling.py ->
scoring.py (dynamic.py repeats the two) -> advantages.py -> logprobs.py -> updates.py -> records.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import torch

from grpo_lab.objective import mismatch
from grpo_lab.objective.functions import grpo_loss, kl_k3
from grpo_lab.trainer.advantages import GroupStep, grpo_advantages
from grpo_lab.trainer.batch import Batch
from grpo_lab.trainer.components import Components
from grpo_lab.trainer.dynamic import collect_with_signal
from grpo_lab.trainer.logprobs import with_logprobs
from grpo_lab.trainer.records import log_step_tables, named, step_scalars
from grpo_lab.trainer.rollout import token_logprobs
from grpo_lab.trainer.sampling import sample_groups, step_prompts
from grpo_lab.trainer.scoring import score
from grpo_lab.trainer.step_result import StepResult
from grpo_lab.trainer.updates import (LastPass, TokenStats, Updates, guard_inputs, loss_scale, minibatch_indices,
                                      optimizer_step)


def grpo_step(c: Components, step: int) -> StepResult:
    cfg = c.cfg
    start = time.perf_counter()
    # one pass over one minibatch: pi_old is that update's own forward, detached (no second forward)
    reuse_first_pass = cfg.passes == 1 and cfg.minibatches == 1 and not cfg.dynamic_sampling

    # --- sample G completions per prompt from pi_old and score them ---
    if cfg.dynamic_sampling:  # groups with equal rewards are replaced by more prompts (DAPO)
        dynamic = collect_with_signal(c, step)
        batch, sampled, dropped, rounds = dynamic.kept, dynamic.sampled, dynamic.dropped, dynamic.rounds
    else:
        batch = sampled = score(c, sample_groups(c, step_prompts(c, step)), step)
        dropped, rounds = None, 1

    # --- the group is the baseline: A_i = (r_i - mean) / std ---
    adv = grpo_advantages(c, batch, dropped)

    # --- log pi_old and log pi_ref, once, before any update ---
    if batch.rows:  # dynamic sampling may leave no group to train on
        batch = with_logprobs(c, batch, policy=not reuse_first_pass)

    # --- several clipped passes over the same batch ---
    done = grpo_updates(c, batch, adv, reuse_first_pass=reuse_first_pass)
    batch = done.batch  # with reuse_first_pass, pi_old's log-probs are the first update's
    if dropped is None:  # one batch: what was sampled is what is trained on
        sampled = batch

    # --- records: per-completion figures describe everything sampled, as tables/samples does ---
    # (pi_old's entropy is the trained groups' alone: dynamic sampling's dropped ones had no forward pass)
    metrics = step_scalars(c, sampled, done.stats, done.updates, advantages=adv.logged,
                           frac_zero_std=adv.frac_zero_std, start=start, trained=None if dropped is None else batch)
    metrics.update({named("groups/kept"): float(len(batch.rows)),
                    named("groups/dropped"): float(len(sampled.rows) - len(batch.rows)),
                    named("groups/sampling_rounds"): float(rounds)})
    if done.bonuses:
        metrics[named("loss/entropy_bonus")] = sum(done.bonuses) / len(done.bonuses)
    log_step_tables(c, step, batch, done.stats, done.last, advantages=adv.groups.advantages.flatten(),
                    per_token={"advantage": adv.per_sample[:, None].expand_as(batch.old_logp)}, dropped=dropped)
    # what the run doctor reads besides the scalars: every round's reward failures, the guard's reason
    return StepResult(metrics=metrics, reward_notes=sampled.scores.first_error, skipped_update=done.skipped)


@dataclass
class GroupUpdates:
    """What the passes of one GRPO step leave for the records, and the batch they trained on."""

    batch: Batch  # the batch given, or with reuse_first_pass a copy holding the first update's pi_old
    stats: TokenStats
    last: LastPass
    updates: Updates = field(default_factory=Updates)
    bonuses: list[float] = field(default_factory=list)  # entropy_coef x entropy, per update
    skipped: str | None = None  # why the updates stopped (updates.py's guard); None: every one was taken


def grpo_updates(c: Components, batch: Batch, adv: GroupStep, *, reuse_first_pass: bool) -> GroupUpdates:
    """`passes` passes over the batch, each cut into `minibatches`: grpo_loss, one optimizer step each.
    reuse_first_pass: pi_old (and its entropy) is taken from the first update's forward, detached, and
    returned in `done.batch`; the batch given is never written to.
    Nothing non-finite is stepped (updates.py's guard): such a step trains no further, and
    `done.skipped` says why."""
    cfg = c.cfg
    done = GroupUpdates(batch=batch, stats=TokenStats(), last=LastPass.like(batch.old_logp))
    truncated = batch.rollout.truncated if cfg.mask_truncated else None
    scored = batch.totals[~torch.isnan(batch.totals)]  # NaN: no score (None), which the advantages handle
    done.skipped = guard_inputs(c.dist, reward=scored, advantage=adv.per_sample)
    if done.skipped:
        return done
    for _ in range(cfg.passes if batch.rows else 0):  # dynamic sampling may leave no group to train on
        for idx in minibatch_indices(len(batch.rollout.completions), cfg.minibatches):
            c.timer.count("update", batch.mask[idx].sum())
            with c.timer.phase("update"):
                logp, entropy = token_logprobs(c.policy, batch.rollout.select(idx), cfg.temperature,
                                               with_entropy=reuse_first_pass, entropy_grad=cfg.entropy_coef > 0)
                if reuse_first_pass:  # the same numbers a separate no-grad forward gives, bit for bit
                    done.batch = replace(batch, old_logp=logp.detach(), entropy=entropy.detach())
                pi_old = done.batch
                out = grpo_loss(
                    logp=logp, old_logp=pi_old.old_logp[idx],
                    ref_logp=None if batch.ref_logp is None else batch.ref_logp[idx],
                    advantages=adv.per_sample[idx], mask=batch.mask[idx], settings=cfg.loss_settings,
                    truncated=None if truncated is None else truncated[idx], entropy=entropy,
                    sampler_weight=sampler_weights(cfg, pi_old, idx))
                # several processes: the gradient average across them is the whole batch's gradient
                scale = loss_scale(c.dist, out.loss_mask, cfg.loss_aggregation)  # 1 on one process
                (grad_norm,), done.skipped = optimizer_step(c.optimizer, c.dist, out.loss, [c.policy.parameters()],
                                                            max_grad_norm=cfg.max_grad_norm, scale=scale)
            if done.skipped:
                return done
            kl = out.kl if cfg.beta > 0 else measured_kl(logp, batch.ref_logp, idx)
            done.stats.add(out.ratio, kl, out.clipped_low, out.clipped_high, batch.mask[idx])
            done.updates.add(out.loss.item() * scale, out.policy_loss.item() * scale, grad_norm)
            done.bonuses.append(cfg.entropy_coef * out.entropy.item() * scale)
            done.last.record(idx, logp=logp, ratio=out.ratio, kl=kl, clipped_low=out.clipped_low,
                             clipped_high=out.clipped_high, mask=batch.mask[idx])
    return done


def sampler_weights(cfg, batch: Batch, idx: torch.Tensor) -> torch.Tensor | None:
    """The mismatch correction's weight per token of minibatch `idx` (pi_old / pi_sampler, bounded as
    `mismatch_correction` says); None without a correction or without the sampler's log-probs (tools)."""
    sampler = batch.rollout.sampler_logp
    if cfg.mismatch_correction == "none" or sampler is None:
        return None
    return mismatch.weights(batch.old_logp[idx], sampler[idx], batch.mask[idx], cfg.mismatch_correction,
                            cfg.mismatch_cap, cfg.mismatch_cap_min or None)


def measured_kl(logp: torch.Tensor, ref_logp: torch.Tensor | None, idx: torch.Tensor) -> torch.Tensor:
    """KL to the reference as beta > 0 logs it (k3 per token, this update's policy) for a beta 0 run,
    whose grpo_loss leaves KL out (zeros): with measure_kl the reference is loaded and the KL is
    measured here, off the gradient; without one, zeros (records.py then logs no KL at all)."""
    if ref_logp is None:
        return torch.zeros_like(logp)
    with torch.no_grad():
        return kl_k3(logp, ref_logp[idx])
