"""The dashboard's access to run directories: which runs exist, and their per-step tables.

Which runs exist comes from rundir.runs_index (one index per runs folder, shared by every session:
a rerun reads again only the runs whose files changed). Tables are thin Streamlit caching over
rundir.reader: one incremental TableReader per (run, table) lives in `st.cache_resource`, so every
refresh reads only the part files that are new. Nothing here raises on a damaged run; problems come
back as lines to show as warnings.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import streamlit as st

from grpo_lab.objective.options import DEFAULT_EPSILON, clip_range
from grpo_lab.rundir import query, runs_index
from grpo_lab.rundir.layout import default_runs_dir
from grpo_lab.rundir.reader import RunInfo, TableReader, numeric_scalars, read_run, run_path
from grpo_lab.rundir.status import ACTIVE_STATES  # noqa: F401 - the pages read it as data.ACTIVE_STATES


def runs_dir() -> Path:
    """The runs folder, resolved (once per value and working directory: a page asks dozens of times a run)."""
    folder = default_runs_dir()
    return _resolved(folder, "" if os.path.isabs(folder) else os.getcwd())


@functools.lru_cache(maxsize=8)
def _resolved(folder: str, cwd: str) -> Path:
    return Path(cwd, folder).resolve()


LISTING_MAX_AGE_S = 1.0  # the pages of one rerun, and every session at once, share one look at the folder


def listing() -> runs_index.Listing:
    """Every run, newest first, with its tags (rundir/runs_index.py: a run is read again only when
    its files changed; the folder is looked at at most once a second)."""
    return runs_index.listing(runs_dir(), LISTING_MAX_AGE_S)


def runs() -> list[RunInfo]:
    """Every run, newest first (listing()'s runs; shared with other sessions: read-only)."""
    return list(listing().runs)


def forget_runs() -> None:
    """Look at the folder again at the next listing, so a run just moved (deleted, archived, restored)
    goes or comes back now."""
    runs_index.index(runs_dir()).forget()


def run(name: str) -> RunInfo:
    """One run, read now (status.json and config.json are small)."""
    return read_run(runs_dir(), name)


@dataclass
class Frame:
    df: pd.DataFrame
    problems: list[str] = field(default_factory=list)
    version: tuple = ()
    new_rows: int = 0


@st.cache_resource(max_entries=64, show_spinner=False)
def _reader(run_dir: str, table: str) -> TableReader:
    return TableReader(Path(run_dir), table)


@st.cache_resource(max_entries=32, show_spinner=False)
def _pandas(run_dir: str, table: str, version: tuple, _table) -> pd.DataFrame:
    """The Arrow table as pandas, converted once per table version (treat as read-only)."""
    df = _table.to_pandas()
    if "step" in df:
        df = df.sort_values("step", kind="stable").drop_duplicates("step", keep="last").reset_index(drop=True)
    return df


def table(name: str, table: str) -> Frame:
    """A per-step table (scalars or histograms) of a run, read incrementally."""
    path = str(run_path(runs_dir(), name))
    read = _reader(path, table).read()
    if read.table is None:
        return Frame(pd.DataFrame(), read.problems, read.version, 0)
    arrow, problems = read.table, list(read.problems)
    if table == "scalars":  # every column checked against what the trainer writes (numbers), by its schema
        arrow, wrong = numeric_scalars(arrow)
        problems += wrong
    return Frame(_pandas(path, table, read.version, arrow), problems, read.version, read.new_rows)


def scalars(name: str) -> Frame:
    return table(name, "scalars")


def histograms(name: str) -> Frame:
    return table(name, "histograms")


def latest(frame: Frame, column: str) -> float | None:
    if frame.df.empty or column not in frame.df:
        return None
    last = frame.df[column].last_valid_index()
    return None if last is None else float(frame.df[column].loc[last])


def _number(value, default: float | None, kind=float):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return kind(value)


@dataclass(frozen=True)
class Settings:
    """What the pages derive from a run's config.json, read once, typed, with the trainer's
    defaults where a value is missing or of the wrong type (a hand-edited file never raises)."""

    algo: str = "grpo"
    model: str = "tiny"
    std_mode: str = "group"  # as written (a value the page does not know is shown as such)
    epsilon: float = DEFAULT_EPSILON
    epsilon_high: float | None = None  # None: the same as epsilon
    group_size: int | None = None
    max_new_tokens: int | None = None
    token_detail_groups: int = 2
    advantage_epsilon: float = 0.0
    loss_aggregation: str | None = None  # None: not recorded (an import that does not say)
    beta: float | None = None
    mask_truncated: bool = False

    @property
    def clip_bounds(self) -> tuple[float, float]:
        """1 - epsilon and 1 + epsilon_high: the clip range the trainer used."""
        return clip_range(self.epsilon, self.epsilon_high)


def settings(info: RunInfo) -> Settings:
    """The one accessor for a run's config values (grpo_lab.trainer.config names them)."""
    cfg = info.config if isinstance(info.config, dict) else {}
    base = Settings()
    return Settings(
        algo=str(cfg.get("algo") or base.algo), model=str(cfg.get("model") or base.model),
        std_mode=str(cfg["std_mode"]) if cfg.get("std_mode") is not None else base.std_mode,
        epsilon=_number(cfg.get("epsilon"), base.epsilon) or base.epsilon,
        epsilon_high=_number(cfg.get("epsilon_high"), None),
        group_size=_number(cfg.get("group_size"), None, int), max_new_tokens=_number(cfg.get("max_new_tokens"), None, int),
        token_detail_groups=_number(cfg.get("token_detail_groups"), base.token_detail_groups, int),
        advantage_epsilon=_number(cfg.get("advantage_epsilon"), base.advantage_epsilon),
        loss_aggregation=str(cfg["loss_aggregation"]) if cfg.get("loss_aggregation") is not None else None,
        beta=_number(cfg.get("beta"), None), mask_truncated=cfg.get("mask_truncated") is True)


SEVERITY_ICONS = {"critical": "🛑", "warning": "⚠️", "info": "ℹ️"}


@st.cache_data(ttl=2.0, max_entries=64, show_spinner=False)
def _events(run_dir: str, v: tuple) -> tuple[pd.DataFrame, list[str]]:
    return query.query(Path(run_dir), "events", "SELECT step, kind, severity, message, suggestion FROM {src} "
                       "ORDER BY step, severity")


def events(name: str) -> pd.DataFrame:
    """The run doctor's findings (tables/events), oldest first; empty when there are none."""
    path = run_path(runs_dir(), name)
    df, _ = _events(str(path), query.version(path, "events"))
    return df


def findings_badge(info: RunInfo) -> str:
    """'🛑 1 ⚠️ 2' from status.json's findings counts ('' when the doctor found nothing)."""
    counts = (info.status or {}).get("findings")
    if not isinstance(counts, dict):
        return ""
    return " ".join(f"{icon} {counts[sev]}" for sev, icon in SEVERITY_ICONS.items()
                    if isinstance(counts.get(sev), int) and counts[sev] > 0)
