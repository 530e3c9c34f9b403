"""A sweep's runs as variants, and their per-step tables stacked into one long frame.

Each run's scalars come from data.scalars (read incrementally, cached per table version); the
stacked frame and the per-run statistics are cached on the tuple of (run, version), so a rerun
with nothing new costs a dictionary lookup, and the statistics are numpy/pandas group-bys over
that one frame (grpo_lab/rundir/variants.py), not a loop over runs.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from grpo_lab.dashboard.reading import data
from grpo_lab.rundir import variants
from grpo_lab.rundir.reader import RunInfo


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
    (variants.variant_key); a group is labelled by its first run's name."""
    by_name = {r.name: r for r in runs}
    groups = variants.group_variants({r.name: r.config or {} for r in runs})
    return {names[0] + (f" (+{len(names) - 1})" if len(names) > 1 else ""): [by_name[n] for n in names]
            for names in groups.values()}


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


@st.cache_data(max_entries=16, show_spinner=False)
def _stack(key: tuple, columns: tuple[str, ...], x_mode: str, _frames: tuple) -> pd.DataFrame:
    """One long frame (variant, run, x, step, <columns>) for the runs in `key`; computed once per
    set of table versions."""
    parts = []
    for (variant, name, _version, per_step), df in zip(key, _frames):
        if df.empty or "step" not in df:
            continue
        part = pd.DataFrame({"variant": variant, "run": name, "step": df["step"].to_numpy(),
                             "x": variants.x_axis(df, per_step, x_mode).to_numpy()})
        for c in columns:
            part[c] = df[c].to_numpy() if c in df else float("nan")
        parts.append(part)
    cols = ["variant", "run", "step", "x", *columns]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)


def stacked(groups: dict[str, list[RunInfo]], columns: list[str], x_mode: str) -> tuple[pd.DataFrame, list[str]]:
    """The scalars `columns` of every run in `groups`, long, with x in `x_mode`; and problems to show."""
    frames, key, problems = [], [], []
    for label, runs in groups.items():
        for r in runs:
            frame = data.scalars(r.name)
            problems += [f"{r.name}: {p}" for p in frame.problems]
            frames.append(frame.df)
            key.append((label, r.name, frame.version, _per_step(r)))
    return _stack(tuple(key), tuple(columns), x_mode, tuple(frames)), problems


@st.cache_data(max_entries=16, show_spinner=False)
def run_stats(long: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """variants.per_run over the stacked frame (reward/mean and kl/mean by step), plus each run's variant."""
    reward = long[["run", "step", "reward/mean"]].rename(columns={"reward/mean": "value"})
    kl = long[["run", "step", "kl/mean"]].rename(columns={"kl/mean": "value"}) if "kl/mean" in long else None
    out = variants.per_run(reward, kl, threshold)
    return out.merge(long[["run", "variant"]].drop_duplicates("run"), on="run")
