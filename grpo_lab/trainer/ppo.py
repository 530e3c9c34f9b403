"""One PPO step, top to bottom: sample, score, per-token rewards, GAE, several clipped epochs.

PPO keeps four models where GRPO keeps two or three:

- the policy (trained), which samples the responses;
- the value model (trained alongside), which predicts for every prefix the return still to come;
- the reward: here the configured reward functions (a rule, or a reward model), scoring the full
  response once;
- the frozen reference (the policy as RL began), whose per-token KL becomes a reward penalty.

The value model is a separate model: a copy of the policy's transformer body, initialised from the
policy as RL starts (after the warm start), with a fresh linear head `hidden -> 1` set to zero, so
every prediction starts at 0. Why a separate model and not a head on the policy: it is the
chapter's picture (the value model is what GRPO saves), its parameters and memory show up in the
run's `trained_params` and `peak_memory_mb`, and the value loss cannot pull on the policy's
weights. Why start from the policy's weights: it is the usual RLHF choice (a value model started
from the SFT or reward model already reads the prompt), it works for any policy without knowing how
to build a fresh one, and with a pretrained policy a random body would have everything to learn.
On the built-in task a fresh random body learned about as fast: the tiny model reads "a+b=" easily.

Rewards per token, the usual RLHF form (InstructGPT; Ouyang et al. 2022, eq. 2):
r_t = -beta * KL_t on every token (KL_t: `kl_estimator`, k1 or k3, of pi_old against the
reference), plus the response's score on its last token. The policy loss itself has no KL term.
k1 is the default: k3 of a sampled token the policy has nearly ruled out is huge, and folded into
the rewards such an outlier swamps the value targets.
GAE runs over the tokens with `gamma` and `lam`; advantages are whitened over the batch.
A response no reward function scored (None) is left out of both losses: no signal, no target.

The stages are GRPO's (grpo.py), with the log-probabilities and V_old taken before the advantages,
which need them: sampling.py -> scoring.py -> logprobs.py -> advantages.py -> updates.py -> records.py.

One behaviour to expect: whitening gives every step unit-sized advantages, however well the task is
already solved, where GRPO's solved groups (all rewards equal) fall silent. With GRPO's learning
rate and passes PPO can therefore keep pushing a near-deterministic policy late in a run; fewer
`passes` or a lower `lr` steady it (bench/bench_ppo_vs_grpo.py measures both algorithms).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from grpo_lab.objective.functions import (
    aggregate,
    clipped_surrogate,
    clipped_value_loss,
    explained_variance,
    kl_k3,
    masked_mean,
    policy_ratio,
)
from grpo_lab.trainer.advantages import TokenStep, ppo_advantages
from grpo_lab.trainer.batch import Batch
from grpo_lab.trainer.components import Components
from grpo_lab.trainer.logprobs import with_logprobs
from grpo_lab.trainer.records import log_step_tables, named, step_scalars
from grpo_lab.trainer.rollout import token_logprobs
from grpo_lab.trainer.sampling import sample_groups, step_prompts
from grpo_lab.trainer.scoring import score
from grpo_lab.trainer.step_result import StepResult
from grpo_lab.trainer.updates import LastPass, TokenStats, Updates, guard_inputs, minibatch_indices, optimizer_step
from grpo_lab.trainer.value import token_values


def ppo_step(c: Components, step: int) -> StepResult:
    cfg = c.cfg
    start = time.perf_counter()

    # --- sample from pi_old and score the full responses; unscored ones are left out of the update ---
    batch = score(c, sample_groups(c, step_prompts(c, step)), step)

    # --- log pi_old, log pi_ref and V_old, once, before any update ---
    batch = with_logprobs(c, batch)
    with torch.no_grad(), c.timer.phase("old_logp"):  # (PPO: V_old with pi_old)
        old_values = token_values(c.value_model, batch.rollout)

    # --- per-token rewards (-beta * KL on every token, the score on the last one), GAE, whitened ---
    adv = ppo_advantages(c, batch, old_values)

    # --- several epochs over minibatches: clipped policy loss + clipped value loss ---
    done = ppo_updates(c, batch, adv, old_values)

    # --- records ---
    mean = {k: sum(v) / len(v) if v else math.nan for k, v in done.logs.items()}  # none: the guard skipped them
    train_mask = adv.train_mask
    metrics = step_scalars(c, batch, done.stats, done.updates, advantages=adv.advantages[train_mask.bool()].cpu(),
                           frac_zero_std=adv.frac_zero_std, start=start)
    metrics.update({
        named("value/loss"): mean["value"],
        named("value/clip_frac"): mean["value_clip"],
        named("value/explained_variance"): explained_variance(old_values, adv.returns, train_mask),
        named("value/mean"): float(masked_mean(old_values, train_mask)),
        named("value/grad_norm"): mean["value_grad"],
        named("returns/mean"): float(masked_mean(adv.returns, train_mask)),
        named("advantage/raw_mean"): float(masked_mean(adv.raw, train_mask)),
        named("kl/approx"): mean["approx_kl"],
        named("kl/folded"): float(masked_mean(adv.folded_kl, batch.mask)),
        named("kl/penalty"): float((cfg.beta * adv.folded_kl).sum(dim=1).mean()),
    })
    per_response_adv = masked_mean(adv.advantages, train_mask, dim=1)  # one number per row of samples
    log_step_tables(c, step, batch, done.stats, done.last, advantages=per_response_adv.cpu(),
                    per_token={"advantage": adv.advantages, "value": old_values, "return": adv.returns,
                               "token_reward": adv.token_rewards})
    return StepResult(metrics=metrics, reward_notes=batch.scores.first_error, skipped_update=done.skipped)


@dataclass
class TokenUpdates:
    """What the epochs of one PPO step leave for the records."""

    stats: TokenStats
    last: LastPass
    logs: dict[str, list[float]] = field(default_factory=lambda: {
        k: [] for k in ("loss", "policy", "value", "value_clip", "approx_kl", "grad", "value_grad")})
    skipped: str | None = None  # why the updates stopped (updates.py's guard); None: every one was taken

    @property
    def updates(self) -> Updates:
        return Updates(losses=self.logs["loss"], policy_losses=self.logs["policy"], grad_norms=self.logs["grad"])


def ppo_updates(c: Components, batch: Batch, adv: TokenStep, old_values: torch.Tensor) -> TokenUpdates:
    """`passes` epochs over the batch, each cut into `minibatches`: policy and value loss, one step each.
    Nothing non-finite is stepped (updates.py's guard): such a step trains no further, and
    `done.skipped` says why."""
    cfg, rollout, old_logp, ref_logp, mask = c.cfg, batch.rollout, batch.old_logp, batch.ref_logp, batch.mask
    done = TokenUpdates(stats=TokenStats(), last=LastPass.like(old_logp))
    logs = done.logs
    done.skipped = guard_inputs(c.dist, reward=batch.totals[~torch.isnan(batch.totals)],
                                advantage=adv.advantages[adv.train_mask.bool()])
    if done.skipped:
        return done
    for _ in range(cfg.passes):
        for idx in minibatch_indices(len(rollout.completions), cfg.minibatches):
            c.timer.count("update", adv.train_mask[idx].sum())
            with c.timer.phase("update"):
                sub, m = rollout.select(idx), adv.train_mask[idx]
                logp, _ = token_logprobs(c.policy, sub, cfg.temperature)
                values = token_values(c.value_model, sub)

                # policy loss: the same clipped surrogate as GRPO, with per-token advantages
                ratio = policy_ratio(logp, old_logp[idx])
                surr = clipped_surrogate(ratio, adv.advantages[idx], cfg.epsilon, cfg.epsilon_high)
                policy_loss = -aggregate(surr.objective, m, cfg.loss_aggregation)
                # value loss: regress V on the GAE returns, each update held within value_clip of V_old
                value_loss, value_clip = clipped_value_loss(values, old_values[idx], adv.returns[idx], m,
                                                            cfg.value_clip)
                loss = policy_loss + cfg.value_coef * value_loss
                # each model's gradient is clipped on its own: the value loss must not squeeze the policy's
                (grad, value_grad), done.skipped = optimizer_step(
                    c.optimizer, c.dist, loss, [c.policy.parameters(), c.value_model.parameters()],
                    max_grad_norm=cfg.max_grad_norm)
            if done.skipped:
                return done
            logs["grad"].append(grad)
            logs["value_grad"].append(value_grad)

            with torch.no_grad():
                # KL to the reference, logged as GRPO logs it (k3, every pass); not part of this loss
                kl = kl_k3(logp, ref_logp[idx]) if ref_logp is not None else torch.zeros_like(logp)
                # approximate KL(pi_old || pi_theta), http://joschu.net/blog/kl-approx.html
                log_ratio = logp - old_logp[idx]
                logs["approx_kl"].append(float(masked_mean((log_ratio.exp() - 1) - log_ratio, m)))
            done.stats.add(ratio, kl, surr.clipped_low, surr.clipped_high, mask[idx])
            logs["loss"].append(loss.item())
            logs["policy"].append(policy_loss.item())
            logs["value"].append(value_loss.item())
            logs["value_clip"].append(float(value_clip))
            done.last.record(idx, logp=logp, ratio=ratio, kl=kl, clipped_low=surr.clipped_low,
                             clipped_high=surr.clipped_high, mask=mask[idx])
    return done
