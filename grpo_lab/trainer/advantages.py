"""Stage 3 of a step: advantages from the scored batch.

GRPO: A_i = (r_i - mean) / std within each prompt's group (objective.group_advantages), the group
itself the baseline; with several processes, std_mode batch takes the std over the whole step.
PPO: per-token rewards (-beta * KL on every token, the response's score on its last), GAE over
them with the value model's predictions, whitened over the batch. PPO's advantages need pi_old's
and the reference's log-probabilities and V_old, so its step takes those first (ppo.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from grpo_lab.objective.functions import GroupAdvantages, gae, group_advantages, kl_per_token, whiten
from grpo_lab.trainer.batch import Batch

if TYPE_CHECKING:  # the types alone: Components is built by run.py's prepare
    from grpo_lab.trainer.components import Components
    from grpo_lab.trainer.distributed import Dist


@dataclass
class GroupStep:
    """A GRPO step's advantages: for the loss, for the samples table, and for the step's scalars."""

    per_sample: torch.Tensor  # (B,) A_i of the trained completions, on the training device
    groups: GroupAdvantages  # (N, G) each: advantages, mean, std, zero_std (on the CPU)
    logged: torch.Tensor  # the scalars' advantage/* values: every completion sampled (dropped groups' zeros too)
    frac_zero_std: float  # groups/frac_zero_std over every group sampled


def grpo_advantages(c: Components, batch: Batch, dropped: Batch | None = None) -> GroupStep:
    """Group advantages of the batch's groups. dropped: the groups dynamic sampling left out (no
    spread, advantages 0), counted in the logged figures as the samples table shows them."""
    groups = global_group_advantages(c.dist, batch.totals.view(-1, batch.group_size), c.cfg.std_mode)
    flat = groups.advantages.flatten()
    if dropped is None:
        logged, frac_zero_std = flat, groups.zero_std.float().mean().item()
    else:
        n_dropped = len(dropped.rows)
        logged = torch.cat([flat, torch.zeros(n_dropped * batch.group_size)])
        frac_zero_std = n_dropped / (len(batch.rows) + n_dropped)  # every kept group has a spread
    return GroupStep(per_sample=flat.to(c.device), groups=groups, logged=logged, frac_zero_std=frac_zero_std)


def global_group_advantages(d: Dist, rewards: torch.Tensor, std_mode: str) -> GroupAdvantages:
    """objective.group_advantages of this process's groups (N, G), as computed over the global batch:
    the same numbers locally, except std_mode batch, whose std is over every process's rewards."""
    if not d.active or std_mode != "batch":
        return group_advantages(rewards, std_mode)
    whole = group_advantages(d.all_gather_tensor(rewards), std_mode)
    rows = slice(d.rank * rewards.shape[0], (d.rank + 1) * rewards.shape[0])
    return GroupAdvantages(whole.advantages[rows], whole.mean[rows], whole.std[rows], whole.zero_std[rows])


@dataclass
class TokenStep:
    """A PPO step's per-token advantages and what they were made of (each (B, T))."""

    train_mask: torch.Tensor  # the loss mask of the scored responses (an unscored one has no signal, no target)
    folded_kl: torch.Tensor  # KL_t (kl_estimator) of pi_old against the reference; 0 without one
    token_rewards: torch.Tensor  # -beta * KL_t, plus the response's score on its last token
    raw: torch.Tensor  # GAE advantages before whitening
    returns: torch.Tensor  # the value targets
    advantages: torch.Tensor  # whitened over the batch's trained tokens
    frac_zero_std: float  # groups without a reward spread: says nothing about PPO's signal, kept to compare


def ppo_advantages(c: Components, batch: Batch, old_values: torch.Tensor) -> TokenStep:
    """GAE over per-token rewards (InstructGPT's form; ppo.py's docstring says why k1 by default)."""
    cfg, mask, totals = c.cfg, batch.mask, batch.totals
    train_mask = mask * (~torch.isnan(totals)).to(c.device, mask.dtype)[:, None]
    folded_kl = (kl_per_token(batch.old_logp, batch.ref_logp, cfg.kl_estimator) if batch.ref_logp is not None
                 else torch.zeros_like(batch.old_logp)) * mask
    # beta 0 with measure_kl: the KL is measured (kl/folded) but never in the rewards, not even as 0 * KL
    # (0 * inf is NaN where k3 overflows)
    token_rewards = -cfg.beta * (folded_kl if cfg.beta > 0 else torch.zeros_like(folded_kl))
    last_token = (batch.rollout.lengths - 1).clamp(min=0)
    token_rewards[torch.arange(len(last_token), device=last_token.device), last_token] += \
        torch.nan_to_num(totals, nan=0.0).to(c.device)
    raw, returns = gae(token_rewards, old_values, train_mask, cfg.gamma, cfg.lam)
    frac_zero_std = group_advantages(totals.view(-1, cfg.group_size), cfg.std_mode).zero_std.float().mean().item()
    return TokenStep(train_mask=train_mask, folded_kl=folded_kl, token_rewards=token_rewards, raw=raw,
                     returns=returns, advantages=whiten(raw, train_mask), frac_zero_std=frac_zero_std)
