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

One behaviour to expect: whitening gives every step unit-sized advantages, however well the task is
already solved, where GRPO's solved groups (all rewards equal) fall silent. With GRPO's learning
rate and passes PPO can therefore keep pushing a near-deterministic policy late in a run; fewer
`passes` or a lower `lr` steady it (bench/bench_ppo_vs_grpo.py measures both algorithms).
"""

from __future__ import annotations

import time

import torch

from grpo_lab.objective.functions import (
    aggregate,
    clipped_surrogate,
    clipped_value_loss,
    explained_variance,
    gae,
    group_advantages,
    kl_k3,
    kl_per_token,
    masked_mean,
    policy_ratio,
    whiten,
)
from grpo_lab.trainer.records import LastPass, TokenStats, Updates, log_step_tables, step_scalars
from grpo_lab.trainer.rollout import token_logprobs
from grpo_lab.trainer.scoring import collect_batch, minibatch_indices
from grpo_lab.trainer.setup import Components
from grpo_lab.trainer.value import token_values


def ppo_step(c: Components, step: int) -> dict[str, float]:
    cfg = c.cfg
    start = time.perf_counter()

    # --- sample from pi_old and score the full responses; unscored ones are left out of the update ---
    batch = collect_batch(c, step)
    rollout, mask, totals, old_logp, ref_logp = batch.rollout, batch.mask, batch.totals, batch.old_logp, batch.ref_logp
    scored = ~torch.isnan(totals)
    train_mask = mask * scored.to(c.device, mask.dtype)[:, None]
    with torch.no_grad(), c.timer.phase("old_logp"):  # (PPO: V_old with pi_old)
        old_values = token_values(c.value_model, rollout)

    # --- per-token rewards: -beta * KL on every token, the score on the last one ---
    folded_kl = (kl_per_token(old_logp, ref_logp, cfg.kl_estimator) if ref_logp is not None
                 else torch.zeros_like(old_logp)) * mask
    token_rewards = -cfg.beta * folded_kl
    last_token = (rollout.lengths - 1).clamp(min=0)
    token_rewards[torch.arange(len(last_token), device=last_token.device), last_token] += \
        torch.nan_to_num(totals, nan=0.0).to(c.device)

    # --- GAE over tokens, then whiten the advantages over the batch ---
    raw_adv, returns = gae(token_rewards, old_values, train_mask, cfg.gamma, cfg.lam)
    advantages = whiten(raw_adv, train_mask)

    # --- several epochs over minibatches: clipped policy loss + clipped value loss ---
    stats, last = TokenStats(), LastPass.like(old_logp)
    logs: dict[str, list[float]] = {k: [] for k in ("loss", "policy", "value", "value_clip", "approx_kl",
                                                    "grad", "value_grad")}
    max_norm = cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf")
    for _ in range(cfg.passes):
        for idx in minibatch_indices(len(rollout.completions), cfg.minibatches):
            c.timer.count("update", train_mask[idx].sum())
            with c.timer.phase("update"):
                sub, m = rollout.select(idx), train_mask[idx]
                logp, _ = token_logprobs(c.policy, sub, cfg.temperature)
                values = token_values(c.value_model, sub)

                # policy loss: the same clipped surrogate as GRPO, with per-token advantages
                ratio = policy_ratio(logp, old_logp[idx])
                surr = clipped_surrogate(ratio, advantages[idx], cfg.epsilon, cfg.epsilon_high)
                policy_loss = -aggregate(surr.objective, m, cfg.loss_aggregation)
                # value loss: regress V on the GAE returns, each update held within value_clip of V_old
                value_loss, value_clip = clipped_value_loss(values, old_values[idx], returns[idx], m, cfg.value_clip)
                loss = policy_loss + cfg.value_coef * value_loss

                c.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                # each model's gradient is clipped on its own: the value loss must not squeeze the policy's
                logs["grad"].append(float(torch.nn.utils.clip_grad_norm_(c.policy.parameters(), max_norm)))
                logs["value_grad"].append(float(torch.nn.utils.clip_grad_norm_(c.value_model.parameters(), max_norm)))
                c.optimizer.step()

            with torch.no_grad():
                # KL to the reference, logged as GRPO logs it (k3, every pass); not part of this loss
                kl = kl_k3(logp, ref_logp[idx]) if ref_logp is not None else torch.zeros_like(logp)
                # approximate KL(pi_old || pi_theta), http://joschu.net/blog/kl-approx.html
                log_ratio = logp - old_logp[idx]
                logs["approx_kl"].append(float(masked_mean((log_ratio.exp() - 1) - log_ratio, m)))
            stats.add(ratio, kl, surr.clipped_low, surr.clipped_high, mask[idx])
            logs["loss"].append(loss.item())
            logs["policy"].append(policy_loss.item())
            logs["value"].append(value_loss.item())
            logs["value_clip"].append(float(value_clip))
            last.record(idx, logp=logp, ratio=ratio, kl=kl, clipped_low=surr.clipped_low,
                        clipped_high=surr.clipped_high)

    # --- log ---
    mean = {k: sum(v) / len(v) for k, v in logs.items()}
    real = train_mask.bool()
    # the groups' spread says nothing about PPO's signal (the value model is the baseline); kept to compare
    frac_zero_std = group_advantages(totals.view(-1, cfg.group_size), cfg.std_mode).zero_std.float().mean().item()
    updates = Updates(losses=logs["loss"], policy_losses=logs["policy"], grad_norms=logs["grad"])
    metrics = step_scalars(c, batch, stats, updates, advantages=advantages[real].cpu(), frac_zero_std=frac_zero_std,
                           start=start)
    metrics.update({
        "value/loss": mean["value"],
        "value/clip_frac": mean["value_clip"],
        "value/explained_variance": explained_variance(old_values, returns, train_mask),
        "value/mean": float(masked_mean(old_values, train_mask)),
        "value/grad_norm": mean["value_grad"],
        "returns/mean": float(masked_mean(returns, train_mask)),
        "advantage/raw_mean": float(masked_mean(raw_adv, train_mask)),
        "kl/approx": mean["approx_kl"],
        "kl/folded": float(masked_mean(folded_kl, mask)),
        "kl/penalty": float((cfg.beta * folded_kl).sum(dim=1).mean()),
    })
    per_response_adv = masked_mean(advantages, train_mask, dim=1)  # one number per row of samples
    log_step_tables(c, step, batch, stats, last, advantages=per_response_adv.cpu(),
                    per_token={"advantage": advantages, "value": old_values, "return": returns,
                               "token_reward": token_rewards})
    return metrics
