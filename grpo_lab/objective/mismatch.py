"""The sampler against the trainer: how far the probabilities a token was drawn with are from the ones the
training forward gives it, and the corrections TRL and verl apply for it.

Shapes: (B, T) per completion token; `mask` 1 on the loss's tokens. `train_logp` is log pi_old as the
trainer's forward computes it, `sampler_logp` the log-prob the decode loop drew the token with. With a
separate inference engine (vLLM) or other kernels, batch shapes and dtypes they differ, and the clipped
ratio pi_theta / pi_old no longer measures the policy's drift from the distribution that sampled the
data. Their ratio per token, w = pi_old / pi_sampler = exp(train_logp - sampler_logp), is the importance
weight that puts the sample back on pi_old; a correction multiplies each token's loss by it (TRL's
`vllm_importance_sampling_*`, verl's `rollout_correction`):
- token_truncate: w clipped to [cap_min, cap_max] (truncated importance sampling);
- token_mask: w where it lies in [cap_min, cap_max], else 0 (the token leaves the loss);
- sequence_truncate / sequence_mask: the same on the completion's product of w (the sum of its log-ratios),
  one weight for all its tokens.
With this trainer's own decode loop on a CPU in float32 the two are the same forward, so w is 1 to
rounding; the figures are there to show when that stops being true.

>>> train = torch.log(torch.tensor([[0.5, 0.2, 0.9]]))
>>> sampler = torch.log(torch.tensor([[0.5, 0.1, 0.9]]))  # the sampler gave the second token half as much
>>> w = weights(train, sampler, torch.ones(1, 3), "token_truncate", cap_max=1.5)
>>> [round(x, 3) for x in w[0].tolist()]
[1.0, 1.5, 1.0]
>>> [round(x, 3) for x in weights(train, sampler, torch.ones(1, 3), "token_mask", cap_max=1.5)[0].tolist()]
[1.0, 0.0, 1.0]
>>> f = figures(train, sampler, torch.ones(1, 3))
>>> round(f["logp_diff_max"], 3), round(f["out_frac"], 3), round(f["ratio_max"], 3)
(0.693, 0.333, 2.0)
"""

from __future__ import annotations

import math

import torch

from grpo_lab.objective.options import MISMATCH_MODES

MODES = MISMATCH_MODES
BAND = (0.9, 1.1)  # a token whose w leaves this band counts in out_frac
SAFE_LOG = 20.0  # log-ratios are bounded to +-20 before exp (e^20 ~ 5e8), as verl bounds them


def log_ratio(train_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """log w per token (B, T): 0 off the loss's tokens and where the sampler gave no log-prob (NaN)."""
    delta = (train_logp.detach().float() - sampler_logp.float()) * mask
    return torch.nan_to_num(delta, nan=0.0)


def weights(train_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor, mode: str,
            cap_max: float | None = 3.0, cap_min: float | None = None) -> torch.Tensor | None:
    """The correction's weight per token (B, T), no gradient; None for mode 'none'."""
    if mode == "none":
        return None
    if mode not in MODES:
        raise ValueError(f"mismatch_correction: {mode!r} is not one of {', '.join(MODES)}")
    delta = log_ratio(train_logp, sampler_logp, mask)
    if mode.startswith("sequence"):
        delta = delta.sum(dim=1, keepdim=True)
    w = delta.clamp(-SAFE_LOG, SAFE_LOG).exp()
    low = -math.inf if cap_min is None else cap_min
    high = math.inf if cap_max is None else cap_max
    if mode.endswith("truncate"):
        w = w.clamp(min=None if cap_min is None else cap_min, max=None if cap_max is None else cap_max)
    else:
        w = w.masked_fill((w < low) | (w > high), 0.0)
    return w.expand_as(train_logp).contiguous()


def figures(train_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor,
            applied: torch.Tensor | None = None) -> dict[str, float]:
    """The step's figures over the loss's tokens that have a sampler log-prob: |log w| mean and max (TRL's
    sampling_logp_difference), the k3 estimate of KL(pi_sampler || pi_old) (tokens are the sampler's
    draws, so w - 1 - log w), w's mean, min and max, the share of tokens with w outside BAND; and the
    correction's `applied` weights: their mean, min, max and the share of tokens they mask (0)."""
    real = mask.bool() & ~torch.isnan(sampler_logp) & ~torch.isnan(train_logp)
    delta = (train_logp.detach().float() - sampler_logp.float())[real].clamp(-SAFE_LOG, SAFE_LOG)
    if not delta.numel():
        return {name: math.nan for name in NAMES}
    w = delta.exp()
    out = {"logp_diff_mean": float(delta.abs().mean()), "logp_diff_max": float(delta.abs().max()),
           "kl": float((w - 1 - delta).mean()), "ratio_mean": float(w.mean()), "ratio_min": float(w.min()),
           "ratio_max": float(w.max()), "out_frac": float(((w < BAND[0]) | (w > BAND[1])).float().mean())}
    kept = torch.ones_like(w) if applied is None else applied.float()[real]
    out.update({"weight_mean": float(kept.mean()), "weight_min": float(kept.min()), "weight_max": float(kept.max()),
                "masked_frac": float((kept == 0).float().mean())})
    return out


NAMES = ("logp_diff_mean", "logp_diff_max", "kl", "ratio_mean", "ratio_min", "ratio_max", "out_frac", "weight_mean",
         "weight_min", "weight_max", "masked_frac")


def per_completion(train_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Each completion's mean |log w| over its loss tokens (B,): NaN where it has none with a sampler log-prob."""
    real = mask.bool() & ~torch.isnan(sampler_logp) & ~torch.isnan(train_logp)
    delta = (train_logp.detach().float() - sampler_logp.float()).abs()
    total = torch.where(real, delta, torch.zeros_like(delta)).sum(dim=1)
    count = real.sum(dim=1)
    return torch.where(count > 0, total / count.clamp(min=1), torch.full_like(total, math.nan))
