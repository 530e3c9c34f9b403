"""Is the reward honest? The figures that tell a reward that rises because the answers got better from one
the policy learned to game, each a pure function of what a step's samples table already holds.

Shapes: a step's completions come group after group, G each (completion i answers group i // G), or
(imports) each with its group id; a
reward's scores are a list of floats with None where it gave no score. The trainer computes these every
step (trainer/records.py, written as `honesty/*` scalars and the samples' `decided_by` and `strict_pass`
columns); the dashboard recomputes them from the samples table for runs that lack them (imported TRL and
verl runs, older runs). The run doctor reads them (trainer/doctor.py, findings reward_dominated_by,
reward_tracks_length, strict_check_disagrees, eval_diverges); docs/reward-hacking.md walks through one.

- Which component decides the advantage's sign. GRPO's A_i has the sign of r_i - mean(group), and
  r_i - mean = sum over components k of d_k,i = w_k (r_k,i - mean_g r_k): the component whose d_k,i
  has that sign and is the largest decides that completion (`deciders`). A format or length reward
  that decides most signs while the verifier decides few is the first sign of a gamed reward.
- Reward against length, within groups (both centred on their group's mean, so easy prompts with
  short answers do not make a correlation of their own).
- A stricter check: the top completion of each group with a spread, re-checked with the answer alone
  (rewards/strict.py); a high reward that fails it is the reward disagreeing with the answer.
- Saturation and collapse: groups all solved, none solved; the reward's spread within groups.
- Over the run: each figure's mean over the last WINDOW steps against its first WINDOW steps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from grpo_lab.rundir.metrics import named

WINDOW = 10  # steps the trend figures average over (the doctor's checks read these means)
STRICT_SAMPLE = 32  # completions re-checked strictly per step, at most: top of their group, spread evenly
Scores = Sequence[float | None]


def _scored(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def _mean(values) -> float:
    values = [v for v in values if _scored(v)]
    return sum(values) / len(values) if values else math.nan


Groups = int | Sequence[int]  # G (completion i in group i // G), or each completion's group id (an import's)


def _groups(n: int, group_size: Groups) -> list[list[int]]:
    """The completions of each group, by index: G consecutive ones, or those sharing a group id.

    >>> _groups(4, 2), _groups(4, [3, 3, 0, 3])
    ([[0, 1], [2, 3]], [[0, 1, 3], [2]])
    """
    if isinstance(group_size, int):
        return [list(range(g, min(g + group_size, n))) for g in range(0, n, group_size)]
    out: dict[int, list[int]] = {}
    for i, g in enumerate(group_size):
        out.setdefault(g, []).append(i)
    return list(out.values())


def component_shares(per_reward: dict[str, Scores], weights: dict[str, float]) -> dict[str, float]:
    """Each reward's share of the step's total reward: |w_k mean r_k| over the sum of them (NaN: nothing paid).

    >>> component_shares({"correctness": [1.0, 0.0, 0.0, 0.0], "format": [1.0, 1.0, 1.0, 1.0]},
    ...                  {"correctness": 1.0, "format": 0.5})
    {'correctness': 0.333..., 'format': 0.666...}
    """
    paid = {k: abs(weights.get(k, 1.0) * m) if math.isfinite(m := _mean(v)) else 0.0 for k, v in per_reward.items()}
    total = sum(paid.values())
    return {k: p / total if total > 0 else math.nan for k, p in paid.items()}


def deciders(per_reward: dict[str, Scores], weights: dict[str, float], group_size: Groups) -> list[str | None]:
    """Per completion, the reward that decides the sign of its group advantage (module docstring): of the
    components pulling its total the way the total goes, the one pulling hardest. None where the total
    equals its group's mean (A = 0) or it has no score.

    >>> deciders({"correctness": [1.0, 0.0, 0.0, 0.0], "format": [1.0, 1.0, 0.0, 0.0]},
    ...          {"correctness": 1.0, "format": 2.0}, group_size=4)
    ['format', 'format', 'format', 'format']
    >>> deciders({"correctness": [1.0, 0.0], "format": [0.0, 0.0]}, {"correctness": 1.0, "format": 2.0}, 2)
    ['correctness', 'correctness']
    """
    names = list(per_reward)
    n = len(next(iter(per_reward.values()), []))
    out: list[str | None] = [None] * n
    for group in _groups(n, group_size):
        means = {k: _mean(per_reward[k][i] for i in group) for k in names}
        for i in group:
            pulls = {k: weights.get(k, 1.0) * (per_reward[k][i] - means[k]) for k in names
                     if _scored(per_reward[k][i]) and math.isfinite(means[k])}
            total = sum(pulls.values())
            if not pulls or not math.isfinite(total) or abs(total) < 1e-9:  # inf - inf: no sign to decide
                continue
            same_way = {k: p for k, p in pulls.items() if p * total > 0}
            out[i] = max(same_way, key=lambda k: abs(same_way[k])) if same_way else None
    return out


def sign_shares(decided: Sequence[str | None], names: Sequence[str]) -> dict[str, float]:
    """Each reward's share of the completions whose advantage sign some reward decided (NaN: none was).

    >>> sign_shares(["format", "format", None, "correctness"], ["correctness", "format"])
    {'correctness': 0.333..., 'format': 0.666...}
    """
    counted = [d for d in decided if d is not None]
    return {k: (counted.count(k) / len(counted) if counted else math.nan) for k in names}


def _pearson(xs: list[float], ys: list[float]) -> float:
    n = len(xs)
    if n < 3:
        return math.nan
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx, syy = sum((x - mx) ** 2 for x in xs), sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx > 1e-12 and syy > 1e-12 else math.nan


def length_correlation(totals: Scores, lengths: Sequence[float], group_size: Groups) -> float:
    """Pearson correlation of reward and completion length within groups (each centred on its group's
    mean, unscored completions left out); NaN when either has no spread.

    >>> length_correlation([1.0, 0.0, 1.0, 0.0], [9, 3, 10, 4], group_size=2)
    1.0
    >>> length_correlation([1.0, 0.0, 1.0, 0.0], [3, 9, 4, 10], group_size=2)
    -1.0
    >>> length_correlation([1.0, 1.0, 0.0, 0.0], [3, 9, 4, 12], group_size=2)
    nan
    """
    xs, ys = [], []
    for group in _groups(len(totals), group_size):
        kept = [i for i in group if _scored(totals[i])]
        if len(kept) < 2:
            continue
        mr, ml = sum(totals[i] for i in kept) / len(kept), sum(lengths[i] for i in kept) / len(kept)
        xs += [totals[i] - mr for i in kept]
        ys += [lengths[i] - ml for i in kept]
    return _pearson(xs, ys)


def high_scorers(totals: Scores, group_size: Groups, limit: int = STRICT_SAMPLE) -> list[int]:
    """The completions a strict check re-reads: in each group whose rewards differ, its top reward's
    completions (the ones the update pushes up most); at most `limit`, spread evenly over the step.

    >>> high_scorers([1.0, 0.0, 2.0, 2.0, 1.0, 1.0], group_size=2)
    [0]
    >>> high_scorers([0.0, 3.0, 5.0, 1.0, 2.0, 0.0, 7.0, 1.0], group_size=2, limit=2)
    [1, 4]
    """
    top = []
    for group in _groups(len(totals), group_size):
        scored = [totals[i] for i in group if _scored(totals[i])]
        if len(scored) < 2 or max(scored) == min(scored):
            continue
        top += [i for i in group if _scored(totals[i]) and totals[i] == max(scored)]
    if len(top) <= limit:
        return top
    return [top[round(j * len(top) / limit)] for j in range(limit)]


def fail_fraction(passes: Sequence[bool | None]) -> float:
    """Share of the checked completions (not None) that failed the strict check; NaN when none was checked.

    >>> fail_fraction([True, False, None, False]), fail_fraction([None])
    (0.666..., nan)
    """
    checked = [p for p in passes if p is not None]
    return sum(not p for p in checked) / len(checked) if checked else math.nan


def solved_fractions(correct: Scores, group_size: Groups) -> tuple[float, float]:
    """(groups whose every scored completion is right, groups with none right) by a verifier's 0/1 scores.

    >>> solved_fractions([1.0, 1.0, 0.0, 1.0, 0.0, None], group_size=2)
    (0.333..., 0.333...)
    """
    all_right = none_right = counted = 0
    for group in _groups(len(correct), group_size):
        scored = [correct[i] for i in group if _scored(correct[i])]
        if not scored:
            continue
        counted += 1
        all_right += all(v >= 1.0 for v in scored)
        none_right += all(v <= 0.0 for v in scored)
    return (all_right / counted, none_right / counted) if counted else (math.nan, math.nan)


def group_spread(totals: Scores, group_size: Groups) -> float:
    """The mean over groups of the reward's population std within the group: what the advantages divide
    out, and what collapses when a policy stops exploring.

    >>> group_spread([1.0, 0.0, 2.0, 2.0], group_size=2)
    0.25
    """
    stds = []
    for group in _groups(len(totals), group_size):
        scored = [totals[i] for i in group if _scored(totals[i])]
        if len(scored) >= 2:
            m = sum(scored) / len(scored)
            stds.append(math.sqrt(sum((v - m) ** 2 for v in scored) / len(scored)))
    return sum(stds) / len(stds) if stds else math.nan


def recent_mean(series: Sequence[float], window: int = WINDOW) -> float:
    """The mean of the last `window` finite values of a per-step series (its trend; NaN: none).

    >>> recent_mean([0.1, math.nan, 0.5, 0.7], window=2)
    0.6
    """
    return _mean([v for v in series if _scored(v)][-window:])


def ratio_to_start(series: Sequence[float], window: int = WINDOW) -> float:
    """The last `window` finite values' mean over the first `window`'s: below 1 the figure fell since the run
    began. NaN until the series has 2 x window values, or when the start's mean is 0.

    >>> ratio_to_start([0.4, 0.4, 0.3, 0.1, 0.1], window=2)
    0.25
    >>> ratio_to_start([0.4, 0.4, 0.3], window=2)
    nan
    """
    values = [v for v in series if _scored(v)]
    if len(values) < 2 * window:
        return math.nan
    start = _mean(values[:window])
    return _mean(values[-window:]) / start if start > 0 else math.nan


def reward_gain(rewards: Sequence[float], stds: Sequence[float], window: int = WINDOW) -> float:
    """How far the training reward rose: its last `window` steps' mean minus its first `window` steps', in
    units of the reward's spread over the first window (its mean reward/std, at least 0.05); NaN until the
    run has 2 x window steps.

    >>> reward_gain([0.0, 0.2, 0.9, 1.1], [0.4, 0.4, 0.1, 0.1], window=2)
    2.25
    """
    values = [v for v in rewards if _scored(v)]
    if len(values) < 2 * window:
        return math.nan
    spread = max(_mean(list(stds)[:window]), 0.05) if _scored(_mean(list(stds)[:window])) else 0.05
    return (_mean(values[-window:]) - _mean(values[:window])) / spread


def accuracy_gain(accuracies: Sequence[float]) -> float:
    """The held-out accuracy's change since the run's first evaluation (NaN before a second one).

    >>> accuracy_gain([math.nan, 0.5, math.nan, 0.25]), accuracy_gain([0.5])
    (-0.25, nan)
    """
    values = [v for v in accuracies if _scored(v)]
    return values[-1] - values[0] if len(values) >= 2 else math.nan


# --- one step's figures, and the run's: what the trainer writes and the dashboard recomputes -------------

VERIFIERS = ("correctness", "code_tests")  # rewards that check the answer: "solved" is theirs, all 1


def step_figures(per_reward: dict[str, Scores], weights: dict[str, float], totals: Scores, lengths: Sequence[float],
                 groups: Groups, strict: Sequence[bool | None], decided: Sequence[str | None]) -> dict[str, float]:
    """The step's honesty/* scalars (rundir/metrics.py, table honesty) but the trends (`Trends`).

    >>> f = step_figures({"correctness": [1.0, 0.0], "length": [0.0, -1.0]}, {"correctness": 1.0, "length": 1.0},
    ...                  [1.0, -1.0], [2, 5], 2, [True, None], ["length", "length"])
    >>> f["honesty/length/sign_share"], f["honesty/strict_fail_frac"], f["honesty/groups_none_solved"]
    (1.0, 0.0, 0.0)
    """
    out = {named("honesty/<fn>/reward_share", k): v for k, v in component_shares(per_reward, weights).items()}
    out.update({named("honesty/<fn>/sign_share", k): v for k, v in sign_shares(decided, list(per_reward)).items()})
    verifier = next((per_reward[k] for k in VERIFIERS if k in per_reward), None)
    solved = solved_fractions(verifier, groups) if verifier is not None else (math.nan, math.nan)
    out.update({
        named("honesty/length_corr"): length_correlation(totals, lengths, groups),
        named("honesty/strict_fail_frac"): fail_fraction(strict),
        named("honesty/strict_checked"): float(sum(p is not None for p in strict)),
        named("honesty/groups_all_solved"): solved[0],
        named("honesty/groups_none_solved"): solved[1],
        named("honesty/group_spread"): group_spread(totals, groups),
    })
    return out


class Trends:
    """A run's series, step after step; `figures` gives the trend figures of the step just added."""

    def __init__(self) -> None:
        self.series: dict[str, list[float]] = {}

    def _add(self, metrics: dict[str, float], name: str) -> list[float]:
        values = self.series.setdefault(name, [])
        value = metrics.get(name, math.nan)
        values.append(float(value) if isinstance(value, (int, float)) else math.nan)
        return values

    def figures(self, metrics: dict[str, float]) -> dict[str, float]:
        """honesty/length_corr_trend and group_spread_ratio every step; on a step with a held-out evaluation
        (eval/accuracy present, NaN too: held-out rows without answers), honesty/reward_gain and eval_accuracy_gain."""
        rewards = self._add(metrics, named("reward/mean"))
        stds = self._add(metrics, named("reward/std"))
        out = {named("honesty/length_corr_trend"): recent_mean(self._add(metrics, named("honesty/length_corr"))),
               named("honesty/group_spread_ratio"): ratio_to_start(self._add(metrics, named("honesty/group_spread")))}
        if isinstance(metrics.get(named("eval/accuracy")), (int, float)):
            out[named("honesty/reward_gain")] = reward_gain(rewards, stds)
            out[named("honesty/eval_accuracy_gain")] = accuracy_gain(self._add(metrics, named("eval/accuracy")))
        return out


def from_samples(samples: pd.DataFrame, scalars: pd.DataFrame | None = None,
                 weights: dict[str, float] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The honesty/* figures recomputed from a run's samples rows (step, group, reward, rewards/<fn>,
    length; strict_pass where the run wrote it), one row per step, for runs that did not write them
    (TRL and verl imports, older runs); `scalars` adds reward/mean, reward/std and eval/accuracy for the
    trends. Returns (the figures, what could not be computed: "strict", "length", "components").

    >>> df = pd.DataFrame({"step": [1, 1, 1, 1], "group": [0, 0, 1, 1], "reward": [1.0, 0.0, 1.0, 0.0],
    ...                    "rewards/f": [1.0, 0.0, 1.0, 0.0], "length": [9, 3, 10, 4]})
    >>> figures, missing = from_samples(df)
    >>> figures["honesty/length_corr"].round(2).tolist(), figures["honesty/f/sign_share"].tolist(), missing
    ([1.0], [1.0], ['strict'])
    """
    fns = [c[len("rewards/"):] for c in samples.columns if c.startswith("rewards/")]
    weights = weights or dict.fromkeys(fns, 1.0)
    missing = [what for what, needs in (("strict", "strict_pass"), ("length", "length")) if needs not in samples]
    if not fns:
        missing.append("components")
    rows = []
    by_step = scalars.set_index("step") if scalars is not None and "step" in scalars else None
    trends = Trends()
    order = [c for c in ("step", "group", "sample_idx") if c in samples]
    for step, part in samples.sort_values(order, kind="stable").groupby("step", sort=True):
        clean = lambda col: [None if pd.isna(v) else float(v) for v in part[col]]  # noqa: E731
        per_reward = {fn: clean(f"rewards/{fn}") for fn in fns}
        totals, groups = clean("reward"), part["group"].tolist()
        lengths = part["length"].tolist() if "length" in part else [0] * len(part)
        strict = ([None if pd.isna(v) else bool(v) for v in part["strict_pass"]] if "strict_pass" in part
                  else [None] * len(part))
        figures = step_figures(per_reward, weights, totals, lengths, groups, strict,
                               deciders(per_reward, weights, groups))
        if "length" not in part:
            figures[named("honesty/length_corr")] = math.nan
        known = by_step.loc[step] if by_step is not None and step in by_step.index else None
        run = {name: (float(known[name]) if known is not None and name in known else math.nan)
               for name in (named("reward/mean"), named("reward/std"), named("eval/accuracy"))}
        if known is None or not math.isfinite(run[named("reward/mean")]):
            run[named("reward/mean")], run[named("reward/std")] = _mean(totals), _std(totals)
        figures.update(trends.figures({**run, **figures}))
        rows.append({"step": step, **figures})
    return pd.DataFrame(rows), missing


def _std(values) -> float:
    values = [v for v in values if _scored(v)]
    if not values:
        return math.nan
    m = sum(values) / len(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / len(values))
