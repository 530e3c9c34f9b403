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

from grpo_lab.rewards.strict import strict_passes
from grpo_lab.rundir import honesty
from grpo_lab.rundir.metrics import named

# The rewards that check the answer itself: a group is "solved" when one of them scores every completion 1.
VERIFIERS = ("correctness", "code_tests")


def weights_of(reward_fns: dict) -> dict[str, float]:
    """{name: weight} of the run's rewards (components.reward_fns: name -> (function, weight))."""
    return {name: float(weight) for name, (_fn, weight) in reward_fns.items()}


def sample_columns(batch, weights: dict[str, float], references: list) -> dict[str, list]:
    """Per completion: `decided_by`, the reward that decides its advantage's sign (null: A = 0), and
    `strict_pass`, the strict check's verdict on the high scorers (null: not checked, or no reference)."""
    totals = [None if math.isnan(t) else t for t in batch.totals.tolist()]
    checked = honesty.high_scorers(totals, batch.group_size) if any(r is not None for r in references) else []
    return {"decided_by": honesty.deciders(batch.scores.per_reward, weights, batch.group_size),
            "strict_pass": strict_passes(batch.rollout.completions, references, checked)}


def step_scalars(batch, weights: dict[str, float], references: list) -> dict[str, float]:
    """The step's honesty/* figures from its batch (all of it: dynamic sampling's dropped groups too)."""
    per_reward, G = batch.scores.per_reward, batch.group_size
    totals = [None if math.isnan(t) else t for t in batch.totals.tolist()]
    columns = sample_columns(batch, weights, references)
    out = {named("honesty/<fn>/reward_share", k): v for k, v in honesty.component_shares(per_reward, weights).items()}
    out.update({named("honesty/<fn>/sign_share", k): v
                for k, v in honesty.sign_shares(columns["decided_by"], list(per_reward)).items()})
    verifier = next((per_reward[k] for k in VERIFIERS if k in per_reward), None)
    solved = honesty.solved_fractions(verifier, G) if verifier is not None else (math.nan, math.nan)
    checked = [p for p in columns["strict_pass"] if p is not None]
    out.update({
        named("honesty/length_corr"): honesty.length_correlation(totals, batch.rollout.lengths.tolist(), G),
        named("honesty/strict_fail_frac"): honesty.fail_fraction(columns["strict_pass"]),
        named("honesty/strict_checked"): float(len(checked)),
        named("honesty/groups_all_solved"): solved[0],
        named("honesty/groups_none_solved"): solved[1],
        named("honesty/group_spread"): honesty.group_spread(totals, G),
    })
    return out


class Trends:
    """The run's series the trend figures are read from; `figures` adds this step's to its metrics."""

    def __init__(self) -> None:
        self.series: dict[str, list[float]] = {}

    def _add(self, metrics: dict[str, float], name: str) -> list[float]:
        values = self.series.setdefault(name, [])
        values.append(float(metrics.get(name, math.nan)))
        return values

    def figures(self, metrics: dict[str, float]) -> dict[str, float]:
        """honesty/length_corr_trend and group_spread_ratio every step; on a step with a held-out evaluation
        (eval/accuracy present), honesty/reward_gain and eval_accuracy_gain."""
        rewards = self._add(metrics, named("reward/mean"))
        stds = self._add(metrics, named("reward/std"))
        out = {named("honesty/length_corr_trend"): honesty.recent_mean(self._add(metrics, named("honesty/length_corr"))),
               named("honesty/group_spread_ratio"): honesty.ratio_to_start(
                   self._add(metrics, named("honesty/group_spread")))}
        if named("eval/accuracy") in metrics:
            out[named("honesty/reward_gain")] = honesty.reward_gain(rewards, stds)
            out[named("honesty/eval_accuracy_gain")] = honesty.accuracy_gain(self._add(metrics, named("eval/accuracy")))
        return out
