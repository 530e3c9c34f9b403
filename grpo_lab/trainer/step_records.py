"""Rank 0's merge of a step's records: the pieces every process sends, each declared with its merge rule.

With several processes each rank trains on its share of the step's groups; rank 0 logs every figure
over all of them. The records (records.py) gather two sets of pieces: what the step's scalars are
computed from (`ScalarPieces`) and what its tables show (`TablePieces`). Each field says how rank 0
merges the ranks' values of it (`merged_by`), so a piece cannot be gathered without its rule. Merged
in rank order: completion i of a merged batch answers global group i // G, and rank r's local group g
is global group r * groups_per_rank + g.

The step's scalars (each rank's step function's dict) travel apart: rank 0's, with the few figures
only a rank knows (ACROSS_RANKS) combined over every rank (`combine_across_ranks`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, TypeVar

import torch

from grpo_lab.rundir.metrics import named
from grpo_lab.trainer.batch import Batch, concat_batches
from grpo_lab.trainer.distributed import Dist, on_cpu
from grpo_lab.trainer.updates import LastPass, TokenStats

# Figures a step function adds to step_scalars' per rank; combined across ranks by rank 0.
ACROSS_RANKS = {named("groups/kept"): sum, named("groups/dropped"): sum, named("groups/sampling_rounds"): max,
                named("loss/entropy_bonus"): lambda values: sum(values) / len(values)}


# --- the rules ---------------------------------------------------------------------------------------


def pad_cat(tensors: list[torch.Tensor], value: Any) -> torch.Tensor:
    """(B_r, T_r) tensors right-padded to the widest, stacked in rank order; (B_r,) ones stacked.

    >>> pad_cat([torch.ones(1, 2), torch.ones(1, 3)], 0.0).tolist()
    [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
    """
    if tensors[0].dim() == 1:
        return torch.cat(tensors)
    width = max(t.shape[1] for t in tensors)
    return torch.cat([torch.nn.functional.pad(t, (0, width - t.shape[1]), value=value) for t in tensors])


def merge_batches(parts: list[Batch]) -> Batch:
    merged = concat_batches(parts, pad_id=0)
    # the ranks sampled side by side: the step waited for the slowest (the logged slowest and mean
    # rank, time/generation_s_max and _mean, come from each rank's timer: ScalarPieces.rank_seconds)
    rollout = dataclasses.replace(merged.rollout, generation_s=max(p.rollout.generation_s for p in parts))
    # concat_batches pads a narrower rank's per-token figures with NaN, where one process's forward
    # has numbers; the entropy is averaged as (entropy * mask): its padding must be a number
    entropy = torch.where(merged.mask.bool(), merged.entropy, torch.zeros_like(merged.entropy))
    return dataclasses.replace(merged, rollout=rollout, entropy=entropy)


def merge_stats(parts: list[TokenStats]) -> TokenStats:
    return TokenStats(ratios=[r for p in parts for r in p.ratios], kls=[k for p in parts for k in p.kls],
                      clipped_low=sum(p.clipped_low for p in parts), clipped_high=sum(p.clipped_high for p in parts),
                      tokens=sum(p.tokens for p in parts))


def merge_last(parts: list[LastPass]) -> LastPass:
    return LastPass(**{f.name: pad_cat([getattr(p, f.name) for p in parts], False if f.name.startswith("clipped")
                                       else 0.0) for f in dataclasses.fields(LastPass)})


def merge_per_token(parts: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Each (B_r, T_r) column padded with 0 to the widest rank's and stacked in rank order."""
    return {k: pad_cat([p[k] for p in parts], 0.0) for k in parts[0]}


def mean_over_ranks(parts: list[float]) -> float:
    """A share's figure averaged over ranks (each rank has the same number of groups)."""
    return sum(parts) / len(parts)


def mean_per_update(parts: list[list[float]]) -> list[float]:
    """Update i's figure averaged over ranks (each rank scaled its own: see updates.loss_scale)."""
    return [sum(values) / len(values) for values in zip(*parts)]


def merge_rank_seconds(parts: list[dict[str, list[float]]]) -> dict[str, list[float]]:
    """timing.rank_seconds of each rank, {phase: [seconds]} -> {phase: [rank 0's, rank 1's, ...]}.

    >>> merge_rank_seconds([{"update": [1.0]}, {"update": [2.0]}])
    {'update': [1.0, 2.0]}
    """
    return {k: [v for p in parts for v in p[k]] for k in parts[0]}


def merged_by(rule: Callable[[list], Any]) -> Any:
    """A piece's field, with the rule rank 0 merges the ranks' values of it by (in rank order)."""
    return dataclasses.field(metadata={"merge": rule})


# --- the pieces --------------------------------------------------------------------------------------


@dataclasses.dataclass
class ScalarPieces:
    """What records.step_scalars computes the step's common scalars from."""

    batch: Batch = merged_by(merge_batches)
    stats: TokenStats = merged_by(merge_stats)
    advantages: torch.Tensor = merged_by(torch.cat)  # one per logged value
    frac_zero_std: float = merged_by(mean_over_ranks)
    policy_losses: list[float] = merged_by(mean_per_update)
    losses: list[float] = merged_by(mean_per_update)
    rank_seconds: dict[str, list[float]] = merged_by(merge_rank_seconds)  # timing.rank_seconds


@dataclasses.dataclass
class TablePieces:
    """What records.log_step_tables writes the samples, histograms and tokens rows from."""

    batch: Batch = merged_by(merge_batches)
    stats: TokenStats = merged_by(merge_stats)
    last: LastPass = merged_by(merge_last)
    advantages: torch.Tensor = merged_by(torch.cat)  # one per completion
    per_token: dict[str, torch.Tensor] = merged_by(merge_per_token)  # (B, T) columns


Pieces = TypeVar("Pieces", ScalarPieces, TablePieces)


def merge(parts: list[Pieces]) -> Pieces:
    """The ranks' pieces (in rank order) as one, each field by its own rule."""
    kind = type(parts[0])
    return kind(**{f.name: f.metadata["merge"]([getattr(p, f.name) for p in parts])
                   for f in dataclasses.fields(kind)})


def gather(d: Dist, pieces: Pieces) -> Pieces:
    """Every rank's pieces of one step, merged on rank 0 into the global batch's; other ranks (and a
    single process) get theirs back unchanged."""
    if not d.active:
        return pieces
    parts = d.gather_object(on_cpu(pieces))
    return pieces if parts is None else merge(parts)


def combine_across_ranks(d: Dist, metrics: dict[str, float]) -> dict[str, float]:
    """Rank 0's metrics with the ACROSS_RANKS figures combined over every rank (others: theirs)."""
    if not d.active:
        return metrics
    mine = {k: v for k, v in metrics.items() if k in ACROSS_RANKS}
    parts = d.gather_object(mine)
    if parts is None:
        return metrics
    return {**metrics, **{k: ACROSS_RANKS[k]([p[k] for p in parts if k in p]) for k in mine}}
