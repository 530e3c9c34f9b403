"""The GRPO / PPO objective as pure tensor functions.

One source of truth: the trainer's loops, the importers (advantages recomputed) and the
dashboard's concept demos all call these. Importing this module has no side effects (no model, no
device, no global state). The named choices and the rules between them (std modes, the clip range,
LossSettings) live in `grpo_lab.objective.options`, which needs no torch.

Shapes: `(B, T)` is B completions by T completion tokens; `mask` is 1 on real completion tokens
(EOS included: stopping is an action), 0 on padding. `(N, G)` is N prompts by G responses each.

The chapter's GRPO is the default of every function. The variants other trainers use are options
(`LossSettings` for the loss), each with the paper it comes from: batch std (`std_mode="batch"`), Dr. GRPO's constant
normaliser (`aggregation="constant"`), GSPO's sequence-level ratio (`importance_level="sequence"`),
truncated completions left out of the loss (DAPO's overlong filtering), an entropy bonus.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from grpo_lab.objective.options import (  # noqa: F401 - re-exported beside the functions
    IMPORTANCE_LEVELS, KL_ESTIMATORS, LOSS_AGGREGATIONS, STD_FORMULAS, STD_MODES, LossSettings, clip_range)

# A group whose reward spread is below this is treated as "all equal": no learning signal.
ZERO_STD_TOL = 1e-6


# --- group advantage (GRPO) -------------------------------------------------------------------


@dataclass(frozen=True)
class GroupAdvantages:
    advantages: torch.Tensor  # (N, G); 0 where the reward is missing or the group has no spread
    mean: torch.Tensor  # (N,)
    std: torch.Tensor  # (N,) the std that divided (1 for std_mode="none", the batch's std for "batch")
    zero_std: torch.Tensor  # (N,) bool: all scored rewards equal, or fewer than 2 scored


def group_advantages(rewards: torch.Tensor, std_mode: str = "group", *, epsilon: float = 0.0,
                     batch_ddof: int = 0, dtype: torch.dtype = torch.float64) -> GroupAdvantages:
    """A_i = (r_i - mean) / std over each row of `rewards` (N, G).

    std_mode: "group" divides by the population std (1/G, the chapter); "sample" by the N-1 std
    (TRL, verl); "batch" centres on the group mean but divides by the population std of every
    scored reward in the batch (TRL's scale_rewards="batch", which takes the N-1 std: batch_ddof;
    "group mean, batch std" in Liu et al., "Tricks or Traps? A Deep Dive into RL for LLM Reasoning",
    2025, arXiv:2508.08221); "none" only centres (Dr. GRPO). NaN rewards mean "no score": left out of
    the mean and std, advantage 0.
    A group whose scored rewards are all equal gets advantages 0, never NaN.

    >>> group_advantages(torch.tensor([[1., 3., 2., 6.]])).advantages.round(decimals=2)
    tensor([[-1.0700,  0.0000, -0.5300,  1.6000]])

    Batch std: a group of one right answer in four (mean 0.25) and a group all right. The first
    group's own std is 0.43 (A = 1.73 for the right answer); the batch's 8 rewards have std 0.48,
    so the same answer gets A = 1.55. A hard prompt's rare success weighs a little less.

    >>> group_advantages(torch.tensor([[1., 0., 0., 0.], [1., 1., 1., 1.]]), "batch").advantages.round(decimals=2)
    tensor([[ 1.5500, -0.5200, -0.5200, -0.5200],
            [ 0.0000,  0.0000,  0.0000,  0.0000]])

    Other trainers' rules are options, so a run is recomputed with its own (grpo_lab/finished_runs/rescore.py reads
    them from config.json). `epsilon` > 0 divides by std + epsilon instead of std, as TRL does
    (1e-4, config.json `advantage_epsilon`): no group is then set to 0 for a small spread, only
    groups with fewer than 2 scores (TRL's std is NaN there, its advantage 0); a group of equal
    rewards still gets 0 = 0 / epsilon. `batch_ddof` 1 makes std_mode "batch" divide by the N-1 std
    of the batch (TRL's scale_rewards="batch", its `nanstd`) instead of the population std. `dtype`:
    what the arithmetic runs in; TRL's is float32, and with a spread of a few float32 steps its mean's
    rounding, divided by std + 1e-4, moves an advantage by 1e-5, so a TRL run is recomputed in float32.
    TRL's default (scale_rewards="group": std_mode "sample"): one right answer in four, 0.75 / (0.5 + 1e-4);
    with scale_rewards="batch" the batch above divides by its N-1 std, 0.52 (1.45, not 1.55):

    >>> group_advantages(torch.tensor([[1., 0., 0., 0.]]), "sample", epsilon=1e-4).advantages
    tensor([[ 1.4997, -0.4999, -0.4999, -0.4999]])
    >>> group_advantages(torch.tensor([[1., 0., 0., 0.], [1., 1., 1., 1.]]), "batch", epsilon=1e-4,
    ...                  batch_ddof=1).advantages.round(decimals=2)
    tensor([[ 1.4500, -0.4800, -0.4800, -0.4800],
            [ 0.0000,  0.0000,  0.0000,  0.0000]])
    """
    if std_mode not in STD_MODES:
        raise ValueError(f"std_mode: must be one of {STD_MODES}, got {std_mode!r}")
    if not (epsilon >= 0 and batch_ddof in (0, 1)):
        raise ValueError(f"epsilon must be >= 0 and batch_ddof 0 or 1, got {epsilon!r} and {batch_ddof!r}")
    rewards = torch.as_tensor(rewards, dtype=dtype)
    if rewards.dim() == 1:
        rewards = rewards.unsqueeze(0)
    scored = ~torch.isnan(rewards)
    count = scored.sum(dim=1)
    filled = torch.where(scored, rewards, torch.zeros_like(rewards))
    mean = filled.sum(dim=1) / count.clamp(min=1)
    sq_dev = torch.where(scored, (rewards - mean[:, None]) ** 2, torch.zeros_like(rewards))
    ddof = 1 if std_mode == "sample" else 0
    var = sq_dev.sum(dim=1) / (count - ddof).clamp(min=1)
    spread = var.sqrt()
    zero_std = (count < 2) | (spread < ZERO_STD_TOL)
    if std_mode == "none":
        std = torch.ones_like(spread)
    elif std_mode == "batch":
        std = _batch_std(rewards, scored, batch_ddof).expand_as(spread)
    else:
        std = spread
    if epsilon > 0:  # std + epsilon never divides by 0: only a group with under 2 scores gets 0
        divide, signal = (torch.ones_like(std) if std_mode == "none" else std + epsilon), count >= 2
    else:
        divide = torch.where(zero_std | (std < ZERO_STD_TOL), torch.ones_like(std), std)
        signal = ~zero_std
    adv = (rewards - mean[:, None]) / divide[:, None]
    adv = torch.where(scored & signal[:, None], adv, torch.zeros_like(adv))
    return GroupAdvantages(adv.float(), mean.float(), std.float(), zero_std)


def _batch_std(rewards: torch.Tensor, scored: torch.Tensor, ddof: int = 0) -> torch.Tensor:
    """Std of every scored reward of the batch, all groups together (a 0-dim tensor): the
    population std (ddof 0), or the N-1 one (ddof 1; 0 with fewer than 2 scores)."""
    values = rewards[scored]
    if values.numel() <= ddof:
        return torch.zeros((), dtype=rewards.dtype)
    return (((values - values.mean()) ** 2).sum() / (values.numel() - ddof)).sqrt()


# --- policy ratio and clipped surrogate -------------------------------------------------------


def policy_ratio(logp_new: torch.Tensor, logp_old: torch.Tensor) -> torch.Tensor:
    """r_t = pi_theta(o_t) / pi_old(o_t), computed in log space for stability."""
    return torch.exp(logp_new - logp_old)


def sequence_ratio(logp_new: torch.Tensor, logp_old: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GSPO's one ratio per response (B,): s_i = exp(1/|o_i| sum_t log r_it), the geometric mean
    of its token ratios over its own tokens (padding left out).

    The response, not the token, is what was rewarded, so GSPO clips the response: one number
    that a single odd token cannot push out of range, and whose gradient spreads over every token
    as s_i / |o_i|. See Zheng et al., "Group Sequence Policy Optimization", 2025, arXiv:2507.18071.

    A token twice as likely and one half as likely cancel out; padding does not count:

    >>> old = torch.log(torch.tensor([[0.2, 0.4, 1.0], [0.4, 0.4, 1.0]]))
    >>> new = torch.log(torch.tensor([[0.4, 0.2, 1.0], [0.6, 0.6, 0.3]]))
    >>> sequence_ratio(new, old, torch.tensor([[1, 1, 0], [1, 1, 0]]))
    tensor([1.0000, 1.5000])
    """
    return torch.exp(masked_mean(logp_new - logp_old, mask, dim=1))


@dataclass(frozen=True)
class Surrogate:
    objective: torch.Tensor  # min(r*A, clip(r)*A), per token; to be maximised
    clipped_ratio: torch.Tensor  # clip(r, 1 - eps_low, 1 + eps_high)
    clipped_low: torch.Tensor  # bool: A < 0 and r < 1 - eps_low (clip active, zero gradient)
    clipped_high: torch.Tensor  # bool: A > 0 and r > 1 + eps_high (clip active, zero gradient)


def clipped_surrogate(
    ratio: torch.Tensor, advantages: torch.Tensor, eps_low: float, eps_high: float | None = None
) -> Surrogate:
    """PPO/GRPO clipped objective min(r*A, clip(r, 1-eps_low, 1+eps_high)*A), per token.

    eps_high defaults to eps_low (the chapter's single epsilon); a larger eps_high is the
    asymmetric "clip-higher" variant (DAPO). A token is counted as clipped only where the min
    picks the clipped term, i.e. where its gradient is zero.

    >>> clipped_surrogate(torch.tensor(0.6 / 0.4), torch.tensor(1.0), 0.2).objective
    tensor(1.2000)
    """
    low, high = clip_range(eps_low, eps_high)
    ratio, advantages = torch.broadcast_tensors(ratio, torch.as_tensor(advantages, dtype=ratio.dtype))
    clipped_ratio = torch.clamp(ratio, low, high)
    return Surrogate(
        objective=torch.minimum(ratio * advantages, clipped_ratio * advantages),
        clipped_ratio=clipped_ratio,
        clipped_low=(advantages < 0) & (ratio < low),
        clipped_high=(advantages > 0) & (ratio > high),
    )


# --- KL to the reference ----------------------------------------------------------------------


def kl_k1(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k1 = log pi(o) - log pi_ref(o): unbiased for KL(pi || ref), can be negative per token."""
    return logp - ref_logp


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """k3 = exp(ref - logp) - (ref - logp) - 1: unbiased for KL(pi || ref), always >= 0.

    See J. Schulman, "Approximating KL Divergence" (2020), http://joschu.net/blog/kl-approx.html
    """
    log_ratio = ref_logp - logp
    return torch.exp(log_ratio) - log_ratio - 1.0


def kl_per_token(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"kl_estimator: must be one of {KL_ESTIMATORS}, got {estimator!r}")
    return kl_k3(logp, ref_logp) if estimator == "k3" else kl_k1(logp, ref_logp)


def exact_kl(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """KL(P || Q) = sum_x P(x) log(P(x)/Q(x)) over the last dimension (terms with P(x)=0 are 0).

    >>> round(float(exact_kl(torch.tensor([0.5, 0.5]), torch.tensor([0.25, 0.75]))), 3)
    0.144
    """
    p = torch.as_tensor(p, dtype=torch.float64)
    q = torch.as_tensor(q, dtype=torch.float64)
    terms = torch.where(p > 0, p * (torch.log(p) - torch.log(q)), torch.zeros_like(p))
    return terms.sum(dim=-1)


# --- aggregation and the full GRPO loss -------------------------------------------------------


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    mask = mask.to(values.dtype)
    if dim is None:
        return (values * mask).sum() / mask.sum().clamp(min=1.0)
    return (values * mask).sum(dim=dim) / mask.sum(dim=dim).clamp(min=1.0)


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, mode: str = "sequence",
              max_len: int | None = None) -> torch.Tensor:
    """Reduce a (B, T) per-token quantity to a scalar.

    "sequence" (the chapter): mean over each response's own length, then mean over responses:
    every response weighs the same, however long. A response with no token left in `mask` (a
    masked truncated one) is left out of that mean, not counted as a zero.
    "token": one mean over all tokens of the batch (DAPO, TRL's "dapo"/"bnpo"): every token weighs
    the same, so long responses weigh more.
    "constant" (Dr. GRPO): the sum over all tokens divided by B * max_len, a number fixed by the
    config, so neither a response's length nor the batch's token count rescales its tokens. See
    Liu et al., "Understanding R1-Zero-Like Training: A Critical Perspective", 2025, arXiv:2503.20783.

    Two responses of 4 and 1 tokens, every term 1: per response 1 and 1; per token 5/5; constant
    with max_len 4: 5 / (2 * 4).

    >>> x, m = torch.ones(2, 4), torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]])
    >>> [round(float(aggregate(x, m, mode, max_len=4)), 3) for mode in LOSS_AGGREGATIONS]
    [1.0, 1.0, 0.625]
    """
    if mode not in LOSS_AGGREGATIONS:
        raise ValueError(f"loss_aggregation: must be one of {LOSS_AGGREGATIONS}, got {mode!r}")
    if mode == "sequence":
        per_response = masked_mean(per_token, mask, dim=1)
        has_tokens = mask.sum(dim=1) > 0
        if bool(has_tokens.all()):
            return per_response.mean()
        return (per_response * has_tokens).sum() / has_tokens.sum().clamp(min=1)
    if mode == "constant":
        if max_len is None or max_len < 1:
            raise ValueError(f"loss_aggregation 'constant' needs max_len >= 1 (the longest completion), "
                             f"got {max_len!r}")
        return (per_token * mask.to(per_token.dtype)).sum() / (per_token.shape[0] * max_len)
    return masked_mean(per_token, mask)


def mask_truncated(mask: torch.Tensor, truncated: torch.Tensor) -> torch.Tensor:
    """`mask` (B, T) with every token of a truncated response (B,) set to 0: out of the loss.

    A completion cut at max_new_tokens was never finished, yet a reward that reads its last
    number can still score it; DAPO's "overlong filtering" leaves such completions out of the
    loss instead of teaching from them (Yu et al., "DAPO", 2025, arXiv:2503.14476).

    >>> mask_truncated(torch.tensor([[1, 1, 1], [1, 1, 0]]), torch.tensor([True, False]))
    tensor([[0, 0, 0],
            [1, 1, 0]])
    """
    return mask * (~truncated.bool())[:, None].to(mask.dtype)


@dataclass(frozen=True)
class GRPOLoss:
    loss: torch.Tensor  # scalar to minimise: -(surrogate - beta * KL + entropy_coef * H), aggregated
    policy_loss: torch.Tensor  # scalar: -surrogate, aggregated
    kl: torch.Tensor  # (B, T) per-token KL (zeros when beta == 0)
    ratio: torch.Tensor  # (B, T); with importance_level="sequence" every token holds its response's s_i
    clipped_low: torch.Tensor  # (B, T) bool; per sequence (the same on all its tokens) at sequence level
    clipped_high: torch.Tensor  # (B, T) bool
    loss_mask: torch.Tensor  # (B, T) the tokens that counted: `mask` less masked truncated responses
    entropy: torch.Tensor  # scalar: the aggregated entropy the bonus rewarded (0 without a bonus)


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    ref_logp: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    settings: LossSettings = LossSettings(),
    *,
    truncated: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    sampler_weight: torch.Tensor | None = None,
) -> GRPOLoss:
    """The chapter's objective, negated for minimisation:

    J = 1/G sum_i 1/|o_i| sum_t [ min(r_it A_i, clip(r_it, 1-eps, 1+eps) A_i) - beta KL_it ]

    `advantages` is (B,) one value per response (GRPO) or (B, T) per token (PPO). `settings` holds
    the clip range, beta and the variants, all off by default: `aggregation` "token" / "constant"
    (with `max_len`, the longest completion allowed) replaces the 1/G 1/|o_i| averaging;
    `importance_level="sequence"` uses GSPO's one ratio per response (`sequence_ratio`) in place
    of r_it; `entropy_coef` > 0 with `entropy` (B, T) adds + entropy_coef * H_t to every token's
    term (a bonus for keeping the policy spread out). `truncated` (B,) bool leaves those responses
    out of the loss. `sampler_weight` (B, T), no gradient, multiplies each token's clipped term (not the KL
    term, as TRL applies it): the sampler/trainer mismatch correction (objective/mismatch.py).

    The chapter's token: pi_old 0.4, pi_new 0.6, A = 1, epsilon 0.2 gives min(1.5, 1.2) = 1.2:

    >>> import math
    >>> grpo_loss(torch.tensor([[math.log(0.6)]]), torch.tensor([[math.log(0.4)]]), None, torch.tensor([1.0]),
    ...           torch.ones(1, 1)).policy_loss
    tensor(-1.2000)
    """
    s = settings
    beta, aggregation, max_len, entropy_coef = s.beta, s.aggregation, s.max_len, s.entropy_coef
    if s.importance_level == "sequence":
        if advantages.dim() != 1:
            raise ValueError("importance_level 'sequence' needs one advantage per response, (B,)")
        ratio = sequence_ratio(logp, old_logp, mask)[:, None].expand_as(logp)
    else:
        ratio = policy_ratio(logp, old_logp)
    adv = advantages[:, None] if advantages.dim() == 1 else advantages
    surr = clipped_surrogate(ratio, adv, s.epsilon, s.epsilon_high)
    if beta > 0 and ref_logp is not None:
        kl = kl_k3(logp, ref_logp)
    else:
        kl = torch.zeros_like(logp)
    loss_mask = mask if truncated is None else mask_truncated(mask, truncated)
    objective = surr.objective if sampler_weight is None else surr.objective * sampler_weight.detach()
    per_token = objective - beta * kl
    bonus = torch.zeros((), dtype=logp.dtype)
    if entropy_coef and entropy is not None:
        bonus = aggregate(entropy, loss_mask, aggregation, max_len)
        per_token = per_token + entropy_coef * entropy
    policy_loss = -aggregate(objective, loss_mask, aggregation, max_len)
    loss = -aggregate(per_token, loss_mask, aggregation, max_len)
    return GRPOLoss(loss=loss, policy_loss=policy_loss, kl=kl, ratio=ratio, clipped_low=surr.clipped_low,
                    clipped_high=surr.clipped_high, loss_mask=loss_mask, entropy=bonus)


# --- PPO: GAE and the value loss --------------------------------------------------------------


def gae(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over the tokens of each response (B, T).

    delta_t = r_t + gamma * V_{t+1} - V_t (V after the last real token is 0: the episode ends);
    A_t = delta_t + gamma * lam * A_{t+1}. Returns (advantages, returns = advantages + values).
    lam = 1 gives Monte-Carlo returns minus values; lam = 0 gives one-step TD errors.
    """
    mask = mask.to(values.dtype)
    values = values * mask
    T = rewards.shape[1]
    advantages = torch.zeros_like(values)
    next_adv = torch.zeros_like(values[:, 0])
    next_value = torch.zeros_like(values[:, 0])
    for t in reversed(range(T)):
        m = mask[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        adv_t = delta + gamma * lam * next_adv
        advantages[:, t] = adv_t * m
        # padding positions pass nothing backwards: the response ended before them
        next_adv = torch.where(m > 0, adv_t, torch.zeros_like(adv_t))
        next_value = torch.where(m > 0, values[:, t], torch.zeros_like(adv_t))
    return advantages, (advantages + values) * mask


def whiten(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Normalise to zero mean, unit variance over the masked entries."""
    mean = masked_mean(values, mask)
    var = masked_mean((values - mean) ** 2, mask)
    return (values - mean) * torch.rsqrt(var + 1e-8) * mask.to(values.dtype)


def clipped_value_loss(
    values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, clip: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's value loss 0.5 * max((V - R)^2, (clip(V, V_old +- clip) - R)^2), token mean.

    Returns (loss, fraction of tokens where the clipped term was the larger one).
    """
    clipped_values = old_values + torch.clamp(values - old_values, -clip, clip)
    loss_unclipped = (values - returns) ** 2
    loss_clipped = (clipped_values - returns) ** 2
    loss = 0.5 * masked_mean(torch.maximum(loss_unclipped, loss_clipped), mask)
    clip_frac = masked_mean((loss_clipped > loss_unclipped).to(values.dtype), mask)
    return loss, clip_frac


def explained_variance(predicted: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> float:
    """1 - Var(target - predicted) / Var(target) over masked entries; NaN when Var(target) = 0."""
    t_mean = masked_mean(target, mask)
    var_t = masked_mean((target - t_mean) ** 2, mask)
    resid = target - predicted
    r_mean = masked_mean(resid, mask)
    var_r = masked_mean((resid - r_mean) ** 2, mask)
    return float("nan") if float(var_t) == 0.0 else float(1.0 - var_r / var_t)


def entropy(logp: torch.Tensor) -> torch.Tensor:
    """Per-position entropy (nats) of a distribution given as log-probabilities over the last dimension."""
    return -(logp.exp() * logp).sum(dim=-1)

