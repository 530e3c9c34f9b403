"""Runs grouped into variants, and statistics across their seeds: pure functions over tables.

A *variant* is one configuration trained with several seeds. Runs of a sweep carry it in
config.json (`sweep` and `variant`, written by grpo-lab-sweep); runs launched one by one form a
variant when their configs are equal apart from the options that differ by construction
(seed, name, runs_dir, ...).

Intervals are Student t-intervals over seeds (mean +- t_{0.975, n-1} * sd / sqrt(n)); two variants
are compared with Welch's interval for the difference of means. With 3-5 seeds a percentile
bootstrap is too narrow (it cannot see past the few values it has), so t it is, and every figure
comes with its n. An interval of a metric that cannot leave a range (a KL is >= 0, a fraction
in [0, 1]: rundir.metrics.value_bounds) is cut at that range: the true mean lies inside it, so the
cut interval covers it exactly as often, and a band no longer dips below a KL of 0.
IQM is the interquartile mean (the mean of the middle half, as rliable
recommends: robust to one diverged seed).

Shapes: a *long* frame has one row per (run, x) with the metric in `value`; per-run statistics
have one row per run.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Iterable

import numpy as np
import pandas as pd

from grpo_lab.rundir.metrics import Bounds, value_bounds

# options that differ between the seeds of one variant by construction, or are not options
NOT_VARIANT = frozenset({"seed", "name", "runs_dir", "resume", "sweep", "variant", "_sources", "sources"})
# Student t quantile 0.975 for 1..30 degrees of freedom (numpy has no t distribution; no scipy here)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)
_Z975, _Z80 = 1.959964, 0.841621  # two-sided 95%, and 80% power: the usual sample-size rule
METRICS = ("final reward", "best reward", "reward AUC", "final KL", "steps to threshold")
METRIC_BOUNDS: dict[str, Bounds] = {"final KL": value_bounds("kl/mean"), "steps to threshold": (1.0, None)}


def within(values, bounds: Bounds):
    """`values` (a number, array or Series) cut at `bounds` (lowest, highest; None: no bound); NaN stays.

    >>> within(-0.2, (0.0, None)), within(np.array([-1.0, 0.5, 2.0, np.nan]), (0.0, 1.0)).tolist()
    (0.0, [0.0, 0.5, 1.0, nan])
    """
    low, high = bounds
    if low is None and high is None:
        return values
    cut = np.clip(values, low, high)
    return float(cut) if np.ndim(cut) == 0 else cut


def t975(df: float) -> float:
    """The 0.975 quantile of Student's t with `df` degrees of freedom (df < 1: nan).

    >>> t975(2), t975(30), round(t975(1000), 3)
    (4.303, 2.042, 1.962)
    """
    if not df >= 1:
        return math.nan
    if df <= 30:
        return _T975[int(df) - 1]  # a fractional Welch df rounds down: the wider interval
    z = _Z975  # Cornish-Fisher expansion: within 1e-3 of the exact value beyond 30
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


def variant_key(config: dict[str, Any]) -> str:
    """The variant a run belongs to: `sweep/variant` for a sweep's run, else a short hash of its
    config without the options seeds differ in.

    >>> variant_key({"sweep": "s", "variant": "beta=0", "seed": 1})
    's/beta=0'
    >>> variant_key({"beta": 0.0, "seed": 1, "name": "a"}) == variant_key({"beta": 0.0, "seed": 2, "name": "b"})
    True
    """
    if config.get("sweep"):
        return f"{config['sweep']}/{config.get('variant') or 'base'}"
    rest = {k: v for k, v in config.items() if k not in NOT_VARIANT}
    return "config-" + hashlib.sha1(json.dumps(rest, sort_keys=True, default=str).encode()).hexdigest()[:8]


def group_variants(configs: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Run names grouped by variant_key, in the order first seen.

    >>> group_variants({"a": {"sweep": "s", "variant": "x"}, "b": {"sweep": "s", "variant": "y"},
    ...                 "c": {"sweep": "s", "variant": "x"}})
    {'s/x': ['a', 'c'], 's/y': ['b']}
    """
    out: dict[str, list[str]] = {}
    for name, config in configs.items():
        out.setdefault(variant_key(config or {}), []).append(name)
    return out


def differing_labels(configs: list[dict[str, Any]]) -> list[str]:
    """Each config named by the options in which it differs from the others (`beta=0`), as a sweep
    names its variants; "" for a config that has every option at the most common value.

    >>> differing_labels([{"beta": 0.04, "lr": 1, "seed": 0}, {"beta": 0.0, "lr": 1, "seed": 1}])
    ['beta=0.04', 'beta=0.0']
    >>> differing_labels([{"beta": 0.04, "lr": 1}, {"beta": 0.04, "lr": 2}, {"beta": 0.0, "lr": 1}])
    ['', 'lr=2', 'beta=0.0']
    """
    keys = sorted({k for c in configs for k in c} - NOT_VARIANT)

    def show(v: Any) -> str:
        return json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else str(v)

    values = {k: [show(c.get(k)) for c in configs] for k in keys}
    differing = [k for k in keys if len(set(values[k])) > 1]
    labels = []
    for i in range(len(configs)):
        own = [k for k in differing if values[k].count(values[k][i]) < len(configs) - 1 or len(configs) == 2]
        labels.append(", ".join(f"{k}={values[k][i]}" for k in own))
    return labels


def t_interval(mean, sd, n, bounds: Bounds = (None, None)):
    """(low, high) of the 95% t-interval mean +- t_{0.975, n-1} * sd / sqrt(n), cut at `bounds`;
    numbers or Series alike (n < 2: nan).

    >>> [round(float(v), 3) for v in (*t_interval(2.0, 1.0, 3), *t_interval(2.0, 1.0, 3, (0.0, None)))]
    [-0.484, 4.484, 0.0, 4.484]
    """
    counts, at = np.unique(np.asarray(n), return_inverse=True)  # one quantile per distinct n
    t = np.array([t975(k - 1) for k in counts])[at].reshape(np.shape(n))
    half = t * sd / np.sqrt(n)
    return within(mean - half, bounds), within(mean + half, bounds)


def mean_ci(values: Iterable[float], bounds: Bounds = (None, None)) -> tuple[float, float, float, int]:
    """(mean, low, high, n) of the finite values, a 95% t-interval cut at `bounds`; one value:
    low = high = nan.

    >>> [round(v, 3) for v in mean_ci([1.0, 2.0, 3.0])[:3]], mean_ci([5.0])[3]
    ([2.0, -0.484, 4.484], 1)
    """
    x = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    n = len(x)
    if n == 0:
        return math.nan, math.nan, math.nan, 0
    m = float(x.mean())
    if n == 1:
        return m, math.nan, math.nan, 1
    low, high = t_interval(m, float(x.std(ddof=1)), n, bounds)
    return m, float(low), float(high), n


def iqm(values: Iterable[float]) -> float:
    """Interquartile mean: drop the lowest and highest quarter of the sorted values, average the rest.

    >>> iqm([0, 1, 2, 3, 100, 4, 5, 6]), iqm([1, 2, 3])
    (3.5, 2.0)
    """
    x = np.sort(np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float))
    if len(x) == 0:
        return math.nan
    cut = int(len(x) * 0.25)
    return float(x[cut:len(x) - cut].mean())


def band(long: pd.DataFrame, x: str = "step", bounds: Bounds = (None, None)) -> pd.DataFrame:
    """Per-x mean and 95% t-band across runs of one variant: columns x, mean, low, high, n.
    `long` has columns run, x, value; an x that only some runs reached counts only those; the band
    is cut at the metric's `bounds`.

    >>> df = pd.DataFrame({"run": ["a", "b", "a", "b"], "step": [1, 1, 2, 2], "value": [0.0, 1.0, 1.0, 1.0]})
    >>> band(df).round(3).to_dict("list")
    {'step': [1, 2], 'mean': [0.5, 1.0], 'low': [-5.853, 1.0], 'high': [6.853, 1.0], 'n': [2, 2]}
    >>> band(df, bounds=(0.0, 1.0)).round(3)[["low", "high"]].to_dict("list")
    {'low': [0.0, 1.0], 'high': [1.0, 1.0]}
    """
    g = long.dropna(subset=["value"]).groupby(x, sort=True)["value"]
    out = g.agg(mean="mean", sd="std", n="count").reset_index()
    out["low"], out["high"] = t_interval(out["mean"], out["sd"], out["n"], bounds)
    return out[[x, "mean", "low", "high", "n"]]


def unmeasured(config: dict | None) -> set[str]:
    """The scalars a run with this config did not measure, whatever it logged: KL without a reference
    model (beta 0: none is loaded, unless measure_kl asked for one; runs before schema 3's fix logged
    such KL as 0). Readers drop them (NaN), so a chart, a summary or a verdict never reads "not
    measured" as 0.

    >>> sorted(unmeasured({"beta": 0})), sorted(unmeasured({"beta": 0.04})), sorted(unmeasured(None))
    (['kl/mean'], [], [])
    >>> sorted(unmeasured({"beta": 0, "measure_kl": True}))
    []
    """
    beta = (config or {}).get("beta")
    zero = isinstance(beta, (int, float)) and not isinstance(beta, bool) and beta == 0
    return {"kl/mean"} if zero and (config or {}).get("measure_kl") is not True else set()


def measured(values) -> bool:
    """Whether any of a variant's runs has a finite value of a metric (else: not measured)."""
    return bool(np.isfinite(np.asarray(pd.Series(values, dtype="float64"))).any())


def per_run(long: pd.DataFrame, kl: pd.DataFrame | None = None, threshold: float = 0.5) -> pd.DataFrame:
    """One row per run: final reward, best reward, reward AUC (the mean reward over its steps: the
    area under the curve per step, comparable across run lengths), final KL, steps to threshold
    (the first step whose reward reaches `threshold`; nan when never). `long` holds reward
    (run, step, value); `kl` the same for kl/mean.

    >>> r = pd.DataFrame({"run": ["a"] * 3, "step": [1, 2, 3], "value": [0.1, 0.6, 0.4]})
    >>> per_run(r).iloc[0].to_dict()
    {'run': 'a', 'final reward': 0.4, 'best reward': 0.6, 'reward AUC': 0.3666666666666667, 'final KL': nan, 'steps to threshold': 2.0}
    """
    r = long.dropna(subset=["value"]).sort_values(["run", "step"])
    g = r.groupby("run", sort=True)["value"]
    out = pd.DataFrame({"final reward": g.last(), "best reward": g.max(), "reward AUC": g.mean()})
    reached = r[r["value"] >= threshold].groupby("run")["step"].min()
    out["final KL"] = (kl.dropna(subset=["value"]).sort_values(["run", "step"]).groupby("run")["value"].last()
                       if kl is not None and not kl.empty else np.nan)
    out["steps to threshold"] = reached.reindex(out.index).astype(float)
    return out.reset_index()[["run", *METRICS]]


def summary_table(runs: pd.DataFrame, variants: dict[str, list[str]]) -> pd.DataFrame:
    """Per variant and metric: mean, 95% CI (low, high), IQM, n seeds. `runs` is per_run's output.
    Steps to threshold counts only the seeds that reached it (its n says how many)."""
    rows = []
    for label, names in variants.items():
        part = runs[runs["run"].isin(names)]
        for metric in METRICS:
            m, lo, hi, n = mean_ci(part[metric], METRIC_BOUNDS.get(metric, (None, None)))
            rows.append({"variant": label, "metric": metric, "mean": m, "ci_low": lo, "ci_high": hi,
                         "iqm": iqm(part[metric]), "n": n})
    return pd.DataFrame(rows, columns=["variant", "metric", "mean", "ci_low", "ci_high", "iqm", "n"])


def difference(a: Iterable[float], b: Iterable[float]) -> dict[str, float]:
    """mean(b) - mean(a) with Welch's 95% interval, and the seeds per variant that 80% power would
    need to detect a difference of this size (two-sided 5%): `needed`.

    >>> d = difference([0.1, 0.2, 0.15], [0.4, 0.5, 0.45])
    >>> round(d["diff"], 3), d["low"] > 0, d["n_a"], d["n_b"]
    (0.3, True, 3, 3)
    """
    x = np.asarray([v for v in a if np.isfinite(v)], dtype=float)
    y = np.asarray([v for v in b if np.isfinite(v)], dtype=float)
    out = {"diff": math.nan, "low": math.nan, "high": math.nan, "n_a": len(x), "n_b": len(y), "needed": math.nan}
    if len(x) < 2 or len(y) < 2:
        if len(x) and len(y):
            out["diff"] = float(y.mean() - x.mean())
        return out
    va, vb = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    diff, se = float(y.mean() - x.mean()), math.sqrt(va + vb)
    welch_df = (va + vb) ** 2 / ((va ** 2 / (len(x) - 1) if va else 0) + (vb ** 2 / (len(y) - 1) if vb else 0) or 1)
    half = t975(max(1.0, welch_df)) * se
    out.update(diff=diff, low=diff - half, high=diff + half)
    pooled = (x.var(ddof=1) + y.var(ddof=1)) / 2
    # means equal up to rounding (0.6 from two sums: 1e-16 apart) have no size to detect; an exact
    # `!= 0` made `needed` a 31-digit int that numpy's isfinite refuses (verdict_parts raised)
    if not math.isclose(float(x.mean()), float(y.mean()), rel_tol=1e-9, abs_tol=1e-12):
        out["needed"] = math.ceil(2 * (_Z975 + _Z80) ** 2 * pooled / diff ** 2)
    return out


def verdict_parts(d: dict[str, float], name_a: str, name_b: str) -> tuple[str, dict[str, Any]]:
    """What a comparison supports, as (kind, fields) for a sentence in any language: kind is
    `higher` (the interval excludes 0), `unclear` (it does not), or `too_few` (a variant has < 2 seeds)."""
    fields: dict[str, Any] = {"a": name_a, "b": name_b, "n_a": d["n_a"], "n_b": d["n_b"]}
    if not np.isfinite(d["low"]):
        return "too_few", fields
    if d["low"] > 0 or d["high"] < 0:
        higher, lower = (name_b, name_a) if d["diff"] > 0 else (name_a, name_b)
        ends = sorted((abs(d["low"]), abs(d["high"])))
        return "higher", {**fields, "higher": higher, "lower": lower, "diff": f"{abs(d['diff']):.3g}",
                          "low": f"{ends[0]:.3g}", "high": f"{ends[1]:.3g}"}
    return "unclear", {**fields, "diff": f"{d['diff']:.3g}", "low": f"{d['low']:.3g}", "high": f"{d['high']:.3g}",
                       "needed": int(d["needed"]) if np.isfinite(d["needed"]) else None}


def verdict(d: dict[str, float], name_a: str, name_b: str, metric: str = "final reward") -> str:
    """The plain sentence a comparison supports (English; the dashboard words verdict_parts per language).

    >>> verdict({"diff": 0.12, "low": 0.05, "high": 0.19, "n_a": 5, "n_b": 5, "needed": 4}, "beta=0", "beta=0.04")
    'beta=0.04 is higher than beta=0 in final reward by 0.12 [0.05, 0.19] (95% CI, 5 and 5 seeds).'
    >>> verdict({"diff": 0.02, "low": -0.1, "high": 0.14, "n_a": 3, "n_b": 3, "needed": 40}, "a", "b")
    'a and b are not distinguishable in final reward with 3 and 3 seeds (difference 0.02 [-0.1, 0.14]); about 40 seeds per variant would be needed to see a difference of this size.'
    """
    kind, f = verdict_parts(d, name_a, name_b)
    n = f"{f['n_a']} and {f['n_b']} seeds"
    if kind == "too_few":
        return f"{name_a} and {name_b} cannot be compared in {metric}: each needs at least 2 seeds (has {n})."
    if kind == "higher":
        return (f"{f['higher']} is higher than {f['lower']} in {metric} by {f['diff']} [{f['low']}, {f['high']}] "
                f"(95% CI, {n}).")
    more = (f"; about {f['needed']} seeds per variant would be needed to see a difference of this size"
            if f["needed"] is not None else "; the means are equal")
    return (f"{name_a} and {name_b} are not distinguishable in {metric} with {n} "
            f"(difference {f['diff']} [{f['low']}, {f['high']}]){more}.")


X_MODES = ("step", "completions", "tokens", "wall")


def x_axis(scalars: pd.DataFrame, completions_per_step: int, mode: str) -> pd.Series:
    """A run's x values for each scalars row: its step; completions sampled so far (step x
    prompts_per_step x G; dynamic sampling's extra rounds are not counted); completion tokens
    trained so far (the cumulative sum of length_mean x completions per step); or elapsed wall
    minutes (`wall_s`, else the summed `time/step_s`).

    >>> df = pd.DataFrame({"step": [1, 2], "completion/length_mean": [3.0, 2.0], "wall_s": [60.0, 120.0]})
    >>> [x_axis(df, 8, m).tolist() for m in X_MODES]
    [[1, 2], [8, 16], [24.0, 40.0], [1.0, 2.0]]
    """
    if mode == "step":
        return scalars["step"]
    if mode == "completions":
        return scalars["step"] * completions_per_step
    if mode == "tokens":
        length = scalars.get("completion/length_mean", pd.Series(np.nan, index=scalars.index))
        return (length.fillna(0) * completions_per_step).cumsum()
    if mode == "wall":
        if "wall_s" in scalars:
            return scalars["wall_s"] / 60
        return scalars.get("time/step_s", pd.Series(0.0, index=scalars.index)).fillna(0).cumsum() / 60
    raise ValueError(f"x: must be one of {', '.join(X_MODES)}, got {mode!r}")
