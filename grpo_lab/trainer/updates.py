"""Stage 5 of a step: the loss and the optimizer updates, and what each update leaves for the records.

What GRPO and PPO share: the minibatches of a pass, the factor that makes several processes'
gradients the global batch's, the guarded optimizer step, and the accumulators the records read
(TokenStats over every pass, LastPass per token, Updates per update).

The guard is the last line of defence: a non-finite reward, advantage or loss never
reaches an optimizer step, so neither the weights nor a checkpoint of them can turn NaN. A step
whose rewards or advantages are not finite skips its updates; an update whose loss or gradient is
not finite has its gradients dropped instead of stepped, and the step's remaining updates are skipped. The step still
logs, and the guard's reason travels back with it (step_result.StepResult.skipped_update; the run
doctor turns it into a critical finding). With several processes every process skips together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable

import torch
import torch.distributed as dist

from grpo_lab.trainer.distributed import Dist


def minibatch_indices(batch: int, minibatches: int) -> list[torch.Tensor]:
    """Row indices of each minibatch of one pass: the whole batch, or a fresh shuffle cut in pieces."""
    order = torch.randperm(batch) if minibatches > 1 else torch.arange(batch)
    return [chunk for chunk in order.chunk(minibatches) if chunk.numel()]


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


# --- the guard -----------------------------------------------------------------------------------


def not_finite(name: str, values: torch.Tensor) -> str | None:
    """A line naming what is not finite in `values`, or None when every value is finite.

    >>> not_finite("reward", torch.tensor([1.0, float("inf"), 0.0, float("nan")]))
    'reward: 2 of 4 values not finite (inf, nan)'
    >>> not_finite("loss", torch.tensor(0.5)) is None
    True
    """
    values = values.detach().flatten()
    bad = values[~torch.isfinite(values)]
    if not bad.numel():
        return None
    kinds = sorted({"nan" if v != v else ("inf" if v > 0 else "-inf") for v in bad.tolist()})
    return f"{name}: {bad.numel()} of {values.numel()} values not finite ({', '.join(kinds)})"


def guard_inputs(d: Dist, **named: torch.Tensor) -> str | None:
    """Why the step may not update, or None when it may: every value of `named` (rewards without the
    unscored NaNs, advantages over the loss's tokens) must be finite on every process."""
    reason = next((line for name, values in named.items() if (line := not_finite(name, values))), None)
    bad, = d.any(reason is not None)
    if bad:
        return reason or "another process's batch had a non-finite reward or advantage"
    return None


def optimizer_step(optimizer: torch.optim.Optimizer, d: Dist, loss: torch.Tensor,
                   clip: Iterable[Iterable[torch.nn.Parameter]], *, max_grad_norm: float,
                   scale: float = 1.0) -> tuple[list[float], str | None]:
    """zero_grad, backward of loss * scale, each parameter group's gradient clipped to max_grad_norm
    (0: no clipping) on its own, then the optimizer step, unless the loss or a gradient is not finite
    (on any process): then the gradients are dropped and no step is taken.
    Returns (each group's gradient norm before clipping, why no step was taken: None when it was)."""
    max_norm = max_grad_norm if max_grad_norm > 0 else float("inf")
    optimizer.zero_grad(set_to_none=True)
    (loss * scale).backward()  # every process runs it: under DDP a backward left out would hang the others
    norms = [float(torch.nn.utils.clip_grad_norm_(params, max_norm)) for params in clip]
    reason = not_finite("loss", loss) or not_finite("gradient norm", torch.tensor(norms))
    bad, = d.any(reason is not None)
    if bad:
        optimizer.zero_grad(set_to_none=True)
        return norms, reason or "another process's loss or gradient was not finite"
    optimizer.step()
    return norms, None


# --- what the updates leave for the records ---------------------------------------------------------


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


@dataclass
class LastPass:
    """Per-token values of the last optimisation pass (each (B, T)): what the tokens table shows for
    each completion once the step is done; and, per completion (each (B,)), its figures over every pass,
    on the same loss tokens TokenStats counts, so a step's completions add up to its scalars exactly:
    kl_sum / clipped / ratio_sum summed over passes and tokens, ratio_peak the largest ratio, passes
    the passes that reached the row."""

    logp_new: torch.Tensor
    ratio: torch.Tensor
    kl: torch.Tensor
    clipped_low: torch.Tensor
    clipped_high: torch.Tensor
    kl_sum: torch.Tensor
    clipped: torch.Tensor
    ratio_sum: torch.Tensor
    ratio_peak: torch.Tensor
    passes: torch.Tensor

    @classmethod
    def like(cls, old_logp: torch.Tensor) -> "LastPass":
        zeros, no = torch.zeros_like(old_logp), torch.zeros_like(old_logp, dtype=torch.bool)
        row = torch.zeros(old_logp.shape[0], dtype=torch.float, device=old_logp.device)
        return cls(logp_new=zeros.clone(), ratio=zeros.clone(), kl=zeros.clone(), clipped_low=no.clone(),
                   clipped_high=no.clone(), kl_sum=row.clone(), clipped=row.long(), ratio_sum=row.clone(),
                   ratio_peak=torch.full_like(row, -math.inf), passes=row.long())

    @classmethod
    def unrecorded(cls, mask: torch.Tensor) -> "LastPass":
        """No last pass (groups dynamic sampling dropped, a step whose update was skipped): NaN, nothing clipped."""
        nan, no = torch.full_like(mask, float("nan")), torch.zeros_like(mask, dtype=torch.bool)
        row = torch.full((mask.shape[0],), float("nan"), device=mask.device)
        return cls(logp_new=nan, ratio=nan.clone(), kl=nan.clone(), clipped_low=no, clipped_high=no.clone(),
                   kl_sum=row, clipped=torch.zeros_like(row, dtype=torch.long), ratio_sum=row.clone(),
                   ratio_peak=row.clone(), passes=torch.zeros_like(row, dtype=torch.long))

    def record(self, idx: torch.Tensor, *, logp: torch.Tensor, ratio: torch.Tensor, kl: torch.Tensor,
               clipped_low: torch.Tensor, clipped_high: torch.Tensor, mask: torch.Tensor) -> None:
        """One update's minibatch `idx`; `mask` its loss tokens (what TokenStats.add counts)."""
        self.logp_new[idx], self.ratio[idx], self.kl[idx] = logp.detach(), ratio.detach(), kl.detach()
        self.clipped_low[idx], self.clipped_high[idx] = clipped_low, clipped_high
        real = mask.bool()
        ratio_, kl_ = ratio.detach().float(), kl.detach().float()
        self.kl_sum[idx] += torch.where(real, kl_, torch.zeros_like(kl_)).sum(dim=1)
        self.ratio_sum[idx] += torch.where(real, ratio_, torch.zeros_like(ratio_)).sum(dim=1)
        self.clipped[idx] += ((clipped_low | clipped_high) & real).sum(dim=1)
        peak = torch.where(real, ratio_, torch.full_like(ratio_, -math.inf)).amax(dim=1)
        self.ratio_peak[idx] = torch.maximum(self.ratio_peak[idx], peak)
        self.passes[idx] += 1


@dataclass
class Updates:
    """What each optimizer update of a step logs, in update order (every minibatch of every pass);
    losses already scaled as the update minimised them."""

    losses: list[float] = field(default_factory=list)
    policy_losses: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)

    def add(self, loss: float, policy_loss: float, grad_norm: float) -> None:
        self.losses.append(loss)
        self.policy_losses.append(policy_loss)
        self.grad_norms.append(grad_norm)
