"""The reward-hacking lens, trainer side: a step's `honesty/*` scalars and its samples' `decided_by` and
`strict_pass` columns (the figures are rundir/honesty.py's pure functions; the strict check is
rewards/strict.py), and the run's trends (`Trends`), kept step after step as the doctor keeps its history.

Every run writes every honesty/* name (NaN where a figure does not apply: one reward has no rival,
a group of one has no spread, prompts without a reference answer have no strict check), so a run's
columns are the registry's (rundir/metrics.py, table `honesty`). Several processes: rank 0 computes
them over the merged batch, as every other figure of the step (records.step_scalars).
"""

from __future__ import annotations

import math
import weakref

from grpo_lab.rewards.strict import strict_passes
from grpo_lab.rundir import honesty


def weights_of(reward_fns: dict) -> dict[str, float]:
    """{name: weight} of the run's rewards (components.reward_fns: name -> (function, weight))."""
    return {name: float(weight) for name, (_fn, weight) in reward_fns.items()}


_last: tuple[weakref.ref, dict[str, list]] | None = None  # the step's batch: its scalars and its rows ask alike


def sample_columns(batch, weights: dict[str, float], references: list) -> dict[str, list]:
    """Per completion: `decided_by`, the reward that decides its advantage's sign (null: A = 0), and
    `strict_pass`, the strict check's verdict on the high scorers (null: not checked, or no reference).
    Computed once per batch: the step's scalars and its samples rows read the same columns."""
    global _last
    if _last is not None and _last[0]() is batch:
        return _last[1]
    totals = [None if math.isnan(t) else t for t in batch.totals.tolist()]
    checked = honesty.high_scorers(totals, batch.group_size) if any(r is not None for r in references) else []
    columns = {"decided_by": honesty.deciders(batch.scores.per_reward, weights, batch.group_size),
               "strict_pass": strict_passes(batch.rollout.completions, references, checked)}
    _last = (weakref.ref(batch), columns)
    return columns


def step_scalars(batch, weights: dict[str, float], references: list) -> dict[str, float]:
    """The step's honesty/* figures from its batch (all of it: dynamic sampling's dropped groups too)."""
    totals = [None if math.isnan(t) else t for t in batch.totals.tolist()]
    columns = sample_columns(batch, weights, references)
    return honesty.step_figures(batch.scores.per_reward, weights, totals, batch.rollout.lengths.tolist(),
                                batch.group_size, columns["strict_pass"], columns["decided_by"])


Trends = honesty.Trends  # kept by the step loop (trainer/run.py), one per run
