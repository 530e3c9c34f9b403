"""A sweep's runs as variants, and the tables the Compare page draws from them, cached.

Speed (target: 3 variants x 5 seeds of 200 steps drawn in <= 2 s). Every table here comes from
one DuckDB query over all the runs' visible scalars parts, not one read per run, and is cached
(st.cache_data) on the parts' identities (name, size, mtime, inode: rundir.query.usable_parts).
A rerun with nothing new therefore costs a stat of each part and dictionary lookups; the bands,
per-run statistics and the summary are numpy/pandas group-bys over the one long frame, computed
once per version of the data (and per x-axis, metric or threshold), never a loop over runs per
rerun. The numbers are those of rundir.variants (band, per_run, summary_table), which
tests/dashboard/test_variants_cache.py holds to against the direct per-run computation.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import streamlit as st

from grpo_lab.dashboard.reading import data
from grpo_lab.dashboard.reading.downsample import minmax_indices
from grpo_lab.rewards.registry import reward_range
from grpo_lab.rundir import query as rq
from grpo_lab.rundir import variants
from grpo_lab.rundir.metrics import value_bounds
from grpo_lab.rundir.reader import RunInfo, run_path

METRICS = ("reward/mean", "kl/mean", "completion/length_mean")  # what the page draws and summarises
_READ = ("step", *METRICS, "wall_s", "time/step_s")  # and what variants.x_axis needs besides
# Points per variant's band sent to the browser: the chart is the page's width (about 1,400 px of
# plot), so 400 min/max-preserving points draw the same envelope as every step would; Vega's first
# paint grows with the points (dashboard/reading/downsample.py). Statistics always use every step.
MAX_BAND_POINTS = 400


def sweeps() -> list[str]:
    """The sweeps in the runs folder (config.json's `sweep`), sorted."""
    return sorted({str(r.config["sweep"]) for r in data.runs() if (r.config or {}).get("sweep")})


def sweep_variants(sweep: str) -> dict[str, list[RunInfo]]:
    """Variant label -> its runs (seeds), for the runs of `sweep`; labels sorted, seeds by seed."""
    runs = [r for r in data.runs() if (r.config or {}).get("sweep") == sweep]
    out: dict[str, list[RunInfo]] = {}
    for r in sorted(runs, key=lambda r: (str(r.config.get("variant") or "base"), _seed(r))):
        out.setdefault(str(r.config.get("variant") or "base"), []).append(r)
    return out


def runs_as_variants(runs: list[RunInfo]) -> dict[str, list[RunInfo]]:
    """Runs launched one by one grouped into variants: equal configs apart from seed and name
    (variants.variant_key); a group is labelled by the options it differs in (`beta=0.0`), else by its
    first run's name."""
    by_name = {r.name: r for r in runs}
    groups = list(variants.group_variants({r.name: r.config or {} for r in runs}).values())
    labels = variants.differing_labels([by_name[names[0]].config or {} for names in groups])
    out = {}
    for names, label in zip(groups, labels):
        label = label if label and label not in out else names[0]
        out[label + (f" (+{len(names) - 1})" if len(names) > 1 and label == names[0] else "")] = [by_name[n] for n in names]
    return out


def _seed(r: RunInfo) -> int:
    try:
        return int((r.config or {}).get("seed", 0))
    except (TypeError, ValueError):
        return 0


def _per_step(r: RunInfo) -> int:
    c = r.config or {}
    try:
        return int(c.get("prompts_per_step", 0)) * int(c.get("group_size", 0))
    except (TypeError, ValueError):
        return 0


# --- the key: which runs, in which variant, at which version of their scalars --------------------

@dataclass(frozen=True)
class Key:
    """Which runs, in which variant, at which version of their scalars: what every table below is
    cached on. `runs` holds (variant, run, completions per step, its parts' identities) per run;
    `files` each run's readable scalars parts, in order; `digest` names both for st.cache_data
    (hashing the nested tuple itself costs Streamlit's hasher ~0.1 s a rerun at 15 runs)."""

    runs: tuple
    files: tuple
    digest: str
    unmeasured: tuple = ()  # (run, metric) pairs the run did not measure (variants.unmeasured): read as NaN
    reward_ranges: tuple = ()  # (variant, lowest, highest) its total reward can take (rewards.reward_range)


def data_key(groups: dict[str, list[RunInfo]]) -> tuple[Key, list[str]]:
    """(the Key of `groups`' runs as they are on disk now, problems met listing their parts)."""
    runs, files, problems, absent = [], [], [], []
    ranges = tuple((label, *_reward_range(members)) for label, members in groups.items())
    for label, members in groups.items():
        for r in members:
            found, found_problems, version, _ = rq.usable_parts(run_path(data.runs_dir(), r.name), "scalars")
            problems += [f"{r.name}: {p}" for p in found_problems]
            runs.append((label, r.name, _per_step(r), version))
            files.append(tuple(found))
            absent += [(r.name, m) for m in sorted(variants.unmeasured(r.config))]
    digest = hashlib.sha1(repr((runs, absent, ranges)).encode()).hexdigest()
    return Key(tuple(runs), tuple(files), digest, tuple(absent), ranges), problems


def _reward_range(members: list[RunInfo]) -> tuple[float | None, float | None]:
    """The range of the variant's total reward: its runs' rewards and weights (config.json) where every
    run agrees and every reward has a known range, else unbounded."""
    specs = {repr((r.config or {}).get("rewards")) for r in members}
    weights = (members[0].config or {}).get("rewards") if members else None
    if len(specs) != 1 or not isinstance(weights, dict):
        return None, None
    try:
        return reward_range({str(k): float(v) for k, v in weights.items()})
    except (TypeError, ValueError):
        return None, None


# --- one query over every run's scalars ---------------------------------------------------------

def _sql_list(names) -> str:
    return ", ".join("'" + n.replace("'", "''") + "'" for n in names)


_SQL = ("SELECT filename, file_row_number, COLUMNS(lambda c: c IN (" + _sql_list(_READ) + ")) FROM {src}")


def _query(key: Key) -> tuple[pd.DataFrame, list[str]]:
    """Rows of every run's parts with `run` and `part` (its index in the run's visible parts). A
    part damaged past its footer fails the one query: then each run is read on its own with
    rundir.query, which reports the damaged part and leaves it out."""
    run_of = {str(f): name for (_, name, _, _), parts in zip(key.runs, key.files) for f in parts}
    part_of = {str(f): i for parts in key.files for i, f in enumerate(parts)}
    problems: list[str] = []
    try:
        rows = rq.query_files([Path(f) for f in run_of], _SQL) if run_of else pd.DataFrame()
    except duckdb.Error:
        frames = []
        for (_, name, _, _), parts in zip(key.runs, key.files):
            if parts:
                df, found = rq.query(run_path(data.runs_dir(), name), "scalars", _SQL)
                frames.append(df)
                problems += [f"{name}: {p}" for p in found]
        rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if rows.empty:
        return rows, problems
    rows = rows[rows["filename"].isin(run_of)]  # a part that appeared since the key was taken waits
    return rows.assign(run=rows["filename"].map(run_of), part=rows["filename"].map(part_of)), problems


@st.cache_data(max_entries=16, show_spinner=False)
def _long(digest: str, _key: Key) -> tuple[pd.DataFrame, list[str]]:
    """(variant, run, step, <_READ>) for the runs of `key`, one row per run and step: a step written
    twice (a resume) keeps its last row, as data.scalars does; runs in key order, steps ascending."""
    key = _key.runs
    rows, problems = _query(_key)
    cols = ["variant", "run", *_READ]
    if rows.empty or "step" not in rows:
        return pd.DataFrame(columns=cols), problems
    rows["order"] = rows["run"].map({name: i for i, (_, name, _, _) in enumerate(key)})
    rows = (rows.sort_values(["order", "step", "part", "file_row_number"], kind="stable")
            .drop_duplicates(["order", "step"], keep="last").reset_index(drop=True))
    rows["variant"] = rows["run"].map({name: label for label, name, _, _ in key})
    for c in _READ:
        if c not in rows:
            rows[c] = np.nan
    for run, metric in _key.unmeasured:  # not measured (a beta 0 run's KL): absent, never 0
        if metric in rows:
            rows.loc[rows["run"] == run, metric] = np.nan
    return rows[cols], problems


def _x(long: pd.DataFrame, per_step: pd.Series, mode: str) -> pd.Series:
    """variants.x_axis for every run at once (grouped by run where it sums over steps)."""
    if mode == "step":
        return long["step"]
    if mode == "completions":
        return long["step"] * per_step
    by_run = long["run"]
    if mode == "tokens":
        return (long["completion/length_mean"].fillna(0) * per_step).groupby(by_run, sort=False).cumsum()
    if mode == "wall":
        summed = long["time/step_s"].fillna(0).groupby(by_run, sort=False).cumsum() / 60
        has_wall = long["wall_s"].notna().groupby(by_run, sort=False).transform("any")
        return (long["wall_s"] / 60).where(has_wall, summed)
    raise ValueError(f"x: must be one of {', '.join(variants.X_MODES)}, got {mode!r}")


def _stacked(key: Key, x_mode: str) -> pd.DataFrame:
    """The long frame the charts read: variant, run, step, x (in `x_mode`), <METRICS>."""
    long, _ = _long(key.digest, key)
    per_step = long["run"].map({name: n for _, name, n, _ in key.runs})
    return long[["variant", "run", "step"]].assign(x=_x(long, per_step, x_mode)).join(long[list(METRICS)])


@st.cache_data(max_entries=16, show_spinner=False)
def _present(digest: str, _key: Key) -> tuple[tuple[str, ...], list[str]]:
    long, problems = _long(digest, _key)
    return tuple(m for m in METRICS if long[m].notna().any()), problems


def present(key: Key) -> tuple[tuple[str, ...], list[str]]:
    """(the METRICS that some run has logged a value of: none when no run has a step yet; problems
    met reading the parts) for `key` (data_key's)."""
    return _present(key.digest, key)


# --- what the page draws: cached per key ---------------------------------------------------------

# metrics whose values are totals of the run's rewards: their band also stays inside the rewards' range
TOTAL_REWARDS = ("reward/mean", "reward/min", "reward/max", "eval/reward_mean")


def band_all(long: pd.DataFrame, metric: str, reward_ranges: tuple = ()) -> pd.DataFrame:
    """variants.band of every variant at once, with x (the mean of its seeds' x at that step):
    columns step, mean, low, high, n, x, variant; variants in first-seen order, steps ascending. The
    band is cut where the metric cannot go: the registry's bounds, and for a total reward the range its
    variant's rewards allow (`reward_ranges`: (variant, lowest, highest); a 0-1 reward's band of 2 seeds
    no longer reaches below 0)."""
    f = pd.DataFrame({"variant": pd.Categorical(long["variant"], categories=list(dict.fromkeys(long["variant"]))),
                      "step": long["step"], "x": long["x"], "value": long[metric]})
    xs = f.groupby(["variant", "step"], observed=True)["x"].mean()
    out = (f.dropna(subset=["value"]).groupby(["variant", "step"], observed=True)["value"]
           .agg(mean="mean", sd="std", n="count"))
    out["low"], out["high"] = variants.t_interval(out["mean"], out["sd"], out["n"], value_bounds(metric))
    if metric in TOTAL_REWARDS:
        for variant, lowest, highest in reward_ranges:
            rows = out.index.get_level_values("variant") == variant
            for side in ("low", "high"):
                out.loc[rows, side] = variants.within(out.loc[rows, side], (lowest, highest))
    out["x"] = xs.reindex(out.index)
    out = out.reset_index()
    out["variant"] = out["variant"].astype(str)
    return out[["step", "mean", "low", "high", "n", "x", "variant"]]


def _thin(df: pd.DataFrame, by: str, value: str, max_points: int) -> pd.DataFrame:
    """At most ~max_points rows per `by` group, keeping each bucket's min and max of `value`."""
    if df.empty or df.groupby(by, sort=False).size().max() <= max_points:
        return df
    keep = [part.index[minmax_indices(part[value].to_numpy(dtype=float), max_points)]
            for _, part in df.groupby(by, sort=False)]
    return df.loc[np.concatenate(keep)].reset_index(drop=True)


@st.cache_data(max_entries=64, show_spinner=False)
def _bands(digest: str, metric: str, x_mode: str, seeds: bool, _key: Key) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    long = _stacked(_key, x_mode)
    band = _thin(band_all(long, metric, _key.reward_ranges), "variant", "mean", MAX_BAND_POINTS)
    if not seeds:
        return band, None
    per_seed = long[["variant", "run", "x", metric]].rename(columns={metric: "value"})
    return band, _thin(per_seed, "run", "value", MAX_BAND_POINTS)


def bands(key: Key, metric: str, x_mode: str, seeds: bool) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """For the chart of `metric`: (its band per variant and step: step, mean, low, high, n, x,
    variant, at most ~MAX_BAND_POINTS per variant; each seed's line: variant, run, x, value, or None)."""
    return _bands(key.digest, metric, x_mode, seeds, key)


@st.cache_data(max_entries=32, show_spinner=False)
def _stats(digest: str, threshold: float, _key: Key) -> tuple[pd.DataFrame, pd.DataFrame]:
    long, _ = _long(digest, _key)
    reward = long[["run", "step", "reward/mean"]].rename(columns={"reward/mean": "value"})
    kl = long[["run", "step", "kl/mean"]].rename(columns={"kl/mean": "value"})
    runs = variants.per_run(reward, kl, threshold).merge(long[["run", "variant"]].drop_duplicates("run"), on="run")
    names: dict[str, list[str]] = {}
    for label, name, _, _ in _key.runs:
        names.setdefault(label, []).append(name)
    return runs, variants.summary_table(runs, names)


def stats(key: Key, threshold: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(variants.per_run with each run's variant; variants.summary_table over them) for `key`."""
    return _stats(key.digest, float(threshold), key)
