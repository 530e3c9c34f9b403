"""One step's batch, the record the stages fill in: sampled and scored (scoring.py), then pi_old's and
the reference's log-probabilities (logprobs.py). A stage returns a new batch (dataclasses.replace) and
never writes into the one it was given. Also how batches are cut into groups and joined (dynamic
sampling's rounds, several processes' shares).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from grpo_lab import rewards
from grpo_lab.objective.options import group_of
from grpo_lab.trainer.rollout import Rollout


@dataclass
class Batch:
    """One step's on-policy batch, as both algorithms start from it. Completion i answers
    rows[group_of(i)]: its G completions of a prompt come one after the other."""

    rows: list[dict]
    group_size: int  # G
    rollout: Rollout
    mask: torch.Tensor  # (B, T) float completion mask
    scores: rewards.Scores
    totals: torch.Tensor  # (B,) NaN where unscored
    # (B, T) log pi_old and its entropy; NaN until `logprobs.with_logprobs` (or, with one pass over one
    # minibatch, until `grpo.grpo_updates` returns them from its update's forward)
    old_logp: torch.Tensor
    entropy: torch.Tensor
    ref_logp: torch.Tensor | None  # (B, T); None without a reference model (or before `with_logprobs`)

    def group_of(self, i: int) -> int:
        """The group (index into rows) of completion i (objective.options.group_of, with this batch's G)."""
        return group_of(i, self.group_size)

    def row_of(self, i: int) -> dict:
        """The prompt row completion i answers."""
        return self.rows[self.group_of(i)]

    def select_groups(self, groups: torch.Tensor) -> "Batch":
        """The groups `groups` ((N,) bool), each with its G completions, in order."""
        G = self.group_size
        kept = groups.nonzero().flatten().tolist()
        rows = torch.tensor([g * G + j for g in kept for j in range(G)], dtype=torch.long)
        scores = pick_scores(self.scores, rows.tolist())
        rollout = self.rollout.select(rows).trimmed()  # the padding only dropped rows needed goes too
        T = rollout.completion_mask.shape[1]
        return Batch(rows=[self.rows[g] for g in kept], group_size=G, rollout=rollout, mask=self.mask[rows, :T],
                     scores=scores, totals=self.totals[rows], old_logp=self.old_logp[rows, :T],
                     entropy=self.entropy[rows, :T], ref_logp=None if self.ref_logp is None else self.ref_logp[rows, :T])


def loss_mask(rollout: Rollout) -> torch.Tensor:
    """(B, T) float: the completion's tokens the policy wrote. A tool's result tokens
    (multiturn.py) are context, not policy: no log-prob ratio, KL or loss."""
    mask = rollout.completion_mask.float()
    return mask if rollout.tool_mask is None else mask * (1 - rollout.tool_mask.float())


def pick_scores(scores: rewards.Scores, pick: list[int]) -> rewards.Scores:
    """The scores of samples `pick`, in that order. Failure counts and logged metrics belong to the
    call that scored the whole batch: they stay behind (dynamic.py counts them per round)."""
    return rewards.Scores(total=[scores.total[i] for i in pick],
                          per_reward={k: [v[i] for i in pick] for k, v in scores.per_reward.items()},
                          extra={k: [v[i] for i in pick] for k, v in scores.extra.items()},
                          first_error=scores.first_error)


def join_scores(parts: list[rewards.Scores], sizes: list[int]) -> rewards.Scores:
    """Several batches' scores end to end; `sizes`: each part's samples (a part missing an
    extra column gets None there)."""
    names = list(parts[0].per_reward)
    columns = dict.fromkeys(k for p in parts for k in p.extra)
    logged = dict.fromkeys(k for p in parts for k in p.logged)
    return rewards.Scores(
        total=[v for p in parts for v in p.total],
        per_reward={k: [v for p in parts for v in p.per_reward[k]] for k in names},
        errors={k: sum(p.errors.get(k, 0) for p in parts) for k in names},
        extra={k: [v for p, n in zip(parts, sizes) for v in p.extra.get(k, [None] * n)] for k in columns},
        logged={k: [v for p in parts for v in p.logged.get(k, [])] for k in logged},
        first_error={k: v for p in reversed(parts) for k, v in p.first_error.items()})


def _pad_right(t: torch.Tensor, width: int, value: float) -> torch.Tensor:
    return torch.nn.functional.pad(t, (0, width - t.shape[1]), value=value)


def concat_batches(parts: list[Batch], pad_id: int) -> Batch:
    """One batch of several (rounds of sampling): prompts left-padded to the longest, completions
    right-padded to the longest, as `rollout.sample` lays out one batch. Empty parts are skipped."""
    parts = [p for p in parts if p.rows] or parts[:1]
    if len(parts) == 1:
        return parts[0]
    P = max(p.rollout.prompt_len for p in parts)
    T = max(p.mask.shape[1] for p in parts)

    def ids(p: Batch, tensor: torch.Tensor, pad: int) -> torch.Tensor:
        prompt, completion = tensor[:, :p.rollout.prompt_len], tensor[:, p.rollout.prompt_len:]
        return torch.cat([torch.nn.functional.pad(prompt, (P - prompt.shape[1], 0), value=pad),
                          _pad_right(completion, T, pad)], dim=1)

    cat = lambda name, value: torch.cat([_pad_right(getattr(p, name), T, value) for p in parts])  # noqa: E731
    rollout = Rollout(
        input_ids=torch.cat([ids(p, p.rollout.input_ids, pad_id) for p in parts]),
        attention_mask=torch.cat([ids(p, p.rollout.attention_mask, 0) for p in parts]),
        prompt_len=P,
        completion_mask=torch.cat([_pad_right(p.rollout.completion_mask, T, 0) for p in parts]),
        truncated=torch.cat([p.rollout.truncated for p in parts]),
        completions=[text for p in parts for text in p.rollout.completions],
        generation_s=sum(p.rollout.generation_s for p in parts),
        tool_mask=(torch.cat([_pad_right(p.rollout.tool_mask, T, 0) for p in parts])
                   if all(p.rollout.tool_mask is not None for p in parts) else None),
        turns=[t for p in parts for t in p.rollout.turns] if all(p.rollout.turns is not None for p in parts) else None,
        sampler_logp=(torch.cat([_pad_right(p.rollout.sampler_logp, T, math.nan) for p in parts])
                      if all(p.rollout.sampler_logp is not None for p in parts) else None))
    scores = join_scores([p.scores for p in parts], [len(p.rollout.completions) for p in parts])
    has_ref = all(p.ref_logp is not None for p in parts)
    return Batch(rows=[r for p in parts for r in p.rows], group_size=parts[0].group_size, rollout=rollout,
                 mask=cat("mask", 0.0), scores=scores, totals=torch.cat([p.totals for p in parts]),
                 old_logp=cat("old_logp", math.nan), entropy=cat("entropy", math.nan),
                 ref_logp=torch.cat([_pad_right(p.ref_logp, T, math.nan) for p in parts]) if has_ref else None)
