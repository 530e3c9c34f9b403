"""Turn one step's tensors into rows of the run directory's tables (see docs/run-directory.md).

Kept apart from the algorithm loops so GRPO and PPO log the same columns the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

# Fixed ratio histogram bins: 40 bins over [0.5, 1.5]; values beyond fall into the end bins.
RATIO_EDGES = torch.linspace(0.5, 1.5, 41)


def _stats(prefix: str, values: torch.Tensor) -> dict[str, float]:
    values = values[~torch.isnan(values)].double()
    if values.numel() == 0:
        return {f"{prefix}/{k}": math.nan for k in ("mean", "std", "min", "max")}
    return {
        f"{prefix}/mean": values.mean().item(),
        f"{prefix}/std": values.std(unbiased=False).item(),
        f"{prefix}/min": values.min().item(),
        f"{prefix}/max": values.max().item(),
    }


def reward_scalars(totals: torch.Tensor, per_reward: dict[str, list[float | None]],
                   errors: dict[str, int], frac_zero_std: float, advantages: torch.Tensor) -> dict[str, float]:
    out = _stats("reward", totals)
    for name, scores in per_reward.items():
        t = torch.tensor([math.nan if s is None else s for s in scores], dtype=torch.float64)
        out.update(_stats(f"rewards/{name}", t))
        out[f"rewards/{name}/none_frac"] = float(torch.isnan(t).double().mean())
        out[f"rewards/{name}/errors"] = float(errors.get(name, 0))
    out.update(_stats("advantage", advantages))
    out["groups/frac_zero_std"] = frac_zero_std
    return out


@dataclass
class TokenStats:
    """Per-token figures accumulated over every optimisation pass of one step."""

    ratios: list[torch.Tensor] = field(default_factory=list)
    kls: list[torch.Tensor] = field(default_factory=list)
    clipped_low: int = 0
    clipped_high: int = 0
    tokens: int = 0

    def add(self, ratio: torch.Tensor, kl: torch.Tensor, low: torch.Tensor, high: torch.Tensor,
            mask: torch.Tensor) -> None:
        real = mask.bool()
        self.ratios.append(ratio.detach()[real].float().cpu())
        self.kls.append(kl.detach()[real].float().cpu())
        self.clipped_low += int((low & real).sum())
        self.clipped_high += int((high & real).sum())
        self.tokens += int(real.sum())

    def scalars(self) -> dict[str, float]:
        ratios = torch.cat(self.ratios)
        n = max(self.tokens, 1)
        return {
            "clip/low": self.clipped_low / n,
            "clip/high": self.clipped_high / n,
            "clip/total": (self.clipped_low + self.clipped_high) / n,
            "ratio/mean": ratios.mean().item(),
            "ratio/min": ratios.min().item(),
            "ratio/max": ratios.max().item(),
            "kl/mean": torch.cat(self.kls).mean().item(),
        }

    def histogram(self, step: int, eps_low: float, eps_high: float) -> dict[str, list]:
        ratios = torch.cat(self.ratios).clamp(RATIO_EDGES[0], RATIO_EDGES[-1] - 1e-6)
        counts = torch.histc(ratios, bins=len(RATIO_EDGES) - 1, min=float(RATIO_EDGES[0]), max=float(RATIO_EDGES[-1]))
        return {
            "step": [step],
            "edges": [RATIO_EDGES.tolist()],
            "counts": [counts.long().tolist()],
            "tokens": [self.tokens],
            "clipped_low": [self.clipped_low],
            "clipped_high": [self.clipped_high],
            "clip_low_bound": [1.0 - eps_low],
            "clip_high_bound": [1.0 + eps_high],
        }


def sample_rows(step: int, rows: list[dict], group_size: int, completions: list[str],
                totals: torch.Tensor, per_reward: dict[str, list[float | None]], advantages: torch.Tensor,
                lengths: torch.Tensor, truncated: torch.Tensor, ratio: torch.Tensor, clipped: torch.Tensor,
                kl: torch.Tensor, mask: torch.Tensor) -> dict[str, list]:
    """One row per completion. ratio/clipped/kl are (B, T) from the last optimisation pass."""
    m = mask.float()
    denom = m.sum(dim=1).clamp(min=1)
    cols: dict[str, list] = {
        "step": [step] * len(completions),
        "prompt_id": [str(rows[i // group_size]["prompt_id"]) for i in range(len(completions))],
        "sample_idx": [i % group_size for i in range(len(completions))],
        "prompt": [rows[i // group_size]["prompt"] for i in range(len(completions))],
        "completion": completions,
        "reward": [None if math.isnan(r) else r for r in totals.tolist()],
        "advantage": advantages.tolist(),
    }
    for name, scores in per_reward.items():
        cols[f"rewards/{name}"] = list(scores)
    cols.update({
        "length": lengths.tolist(),
        "truncated": truncated.tolist(),
        "ratio_mean": ((ratio * m).sum(dim=1) / denom).tolist(),
        "clip_frac": ((clipped.float() * m).sum(dim=1) / denom).tolist(),
        "kl_mean": ((kl * m).sum(dim=1) / denom).tolist(),
    })
    return cols


def token_rows(step: int, rows: list[dict], group_size: int, which: list[int], tokenizer,
               completion_ids: torch.Tensor, mask: torch.Tensor, per_token: dict[str, torch.Tensor]) -> dict[str, list]:
    """One row per completion token for the completions in `which`.

    per_token holds (B, T) tensors: logp_new, logp_old, logp_ref, ratio, kl, clipped_low,
    clipped_high and, for PPO, advantage and value.
    """
    cols: dict[str, list] = {k: [] for k in ("step", "prompt_id", "sample_idx", "position", "token", *per_token)}
    for i in which:
        n = int(mask[i].sum())
        ids = completion_ids[i, :n].tolist()
        cols["step"] += [step] * n
        cols["prompt_id"] += [str(rows[i // group_size]["prompt_id"])] * n
        cols["sample_idx"] += [i % group_size] * n
        cols["position"] += list(range(n))
        cols["token"] += tokenizer.convert_ids_to_tokens(ids)
        for k, t in per_token.items():
            cols[k] += t[i, :n].tolist()
    cols["clipped"] = [bool(a or b) for a, b in zip(cols["clipped_low"], cols["clipped_high"])]
    return cols
