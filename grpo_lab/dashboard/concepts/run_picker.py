"""Streamlit widgets shared by the demos that take numbers from a run: pick a run, a step, a group
or a token. Loading is cached briefly (a run in progress keeps writing)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from grpo_lab.dashboard import ui
from grpo_lab.dashboard.reading import data
from grpo_lab.dashboard.concepts import from_run
from grpo_lab.dashboard.i18n import t
from grpo_lab.rundir.reader import RunInfo


# The column that makes a step worth showing first: a group with a learning signal, a clipped token.
INTERESTING = {"samples": "advantage", "tokens": "clipped"}


@st.cache_data(ttl=5, max_entries=64, show_spinner=False)
def _steps(run: str, table: str, fingerprint: float) -> tuple[list[int], list[int], list[str]]:
    """(all steps with rows, the steps where INTERESTING[table] is non-zero somewhere, warnings)."""
    col = INTERESTING[table]
    loaded = from_run.read_table(Path(run), table, columns=["step", col])
    frame = loaded.frame.dropna(subset=["step"])
    steps = sorted({int(s) for s in frame["step"]})
    flagged = frame[pd.to_numeric(frame[col], errors="coerce").fillna(0) != 0]
    return steps, sorted({int(s) for s in flagged["step"]}), loaded.warnings


@st.cache_data(ttl=5, max_entries=64, show_spinner=False)
def _rows(run: str, table: str, step: int, fingerprint: float) -> tuple[pd.DataFrame, list[str]]:
    loaded = from_run.read_table(Path(run), table, step=step)
    return loaded.frame, loaded.warnings


def pick_run(key: str, algos: tuple[str, ...] | None = None) -> RunInfo | None:
    """A run selector (newest first, only `algos` if given) that starts on the run last opened on
    any page or named by ?run=; None, with a hint, when there are none."""
    runs = [r for r in data.runs() if algos is None or r.algo in algos]
    if not runs:
        st.info(t("run.none", root=data.runs_dir()))
        return None
    return ui.pick_run(f"{key}_run", label=t("run.pick"), runs=runs)


def _warn(warnings: list[str]) -> None:
    if warnings:
        st.warning(t("run.unreadable", detail="; ".join(warnings[:3])))


def pick_step_rows(run: RunInfo, table: str, key: str) -> tuple[int, pd.DataFrame] | None:
    """A step selector over the steps that have rows in `table` (starting at the first step with
    something to see), and that step's rows."""
    fingerprint = from_run.latest_mtime(run.path)
    steps, interesting, warnings = _steps(str(run.path), table, fingerprint)
    _warn(warnings)
    if not steps:
        st.info(t("run.no_samples" if table == "samples" else "run.no_tokens"))
        return None
    first = interesting[0] if interesting else steps[0]
    step = st.select_slider(t("run.step"), steps, value=first, key=f"{key}_step") if len(steps) > 1 else steps[0]
    rows, warnings = _rows(str(run.path), table, int(step), fingerprint)
    _warn(warnings)
    if rows.empty:
        st.info(t("run.no_samples" if table == "samples" else "run.no_tokens"))
        return None
    return int(step), rows


def pick_group(run: RunInfo, key: str, group_key: str) -> tuple[int, list[tuple[str, pd.DataFrame]], str,
                                                                  pd.DataFrame] | None:
    """A step, then one of its groups (starting on one with a learning signal):
    (step, every group of the step as (label, rows), the chosen label, its rows)."""
    picked = pick_step_rows(run, "samples", key)
    if not picked:
        return None
    step, rows = picked
    groups = from_run.split_groups(rows)
    labels = [label for label, _ in groups]
    with_signal = [i for i, (_, g) in enumerate(groups) if (g["advantage"].fillna(0) != 0).any()]
    label = st.selectbox(t("run.group"), labels, index=with_signal[0] if with_signal else 0, key=group_key)
    label = label if label in labels else labels[0]
    return step, groups, label, dict(groups)[label]
