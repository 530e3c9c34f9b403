"""The few numbers the concept demos take from a run, through rundir's one read API.

Everything here tolerates a run in progress or a damaged one: a missing, vanished or corrupt file
becomes a warning string in the result, never an exception. No Streamlit in this module.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_lab.rundir import query as rq
from grpo_lab.rundir.layout import RunPaths
from grpo_lab.rundir.reader import RunInfo


@dataclass
class Loaded:
    """A table (possibly empty) and what went wrong while reading it."""

    frame: pd.DataFrame
    warnings: list[str] = field(default_factory=list)


def read_table(run: Path, table: str, columns: list[str] | None = None,
               step: int | None = None) -> Loaded:
    """The rows of one table (optionally of one step) in the order written; samples and tokens
    carry their `group` column. Columns the table lacks come back as missing values."""
    where = "WHERE step = $step" if step is not None else ""
    # only the columns asked for (names from code, never user text): completions are the bulk
    pick = "* EXCLUDE (filename)" if columns is None else \
        "COLUMNS(lambda c: c IN ({})), file_row_number".format(", ".join(f"'{c}'" for c in columns))
    frame, warnings = rq.query(run, table, f"SELECT {pick} FROM {{src}} {where} ORDER BY filename, file_row_number",
                               {"step": step} if step is not None else None)
    frame = frame.drop(columns=["file_row_number"], errors="ignore")
    if columns is not None:
        for col in columns:
            if col not in frame.columns:
                frame[col] = pd.Series(dtype="float64")
        frame = frame[columns]
    # a table that is missing or has no data yet is an empty frame here, not a warning
    return Loaded(frame, [w for w in warnings if not w.startswith(f"table {table!r}")])


def steps_with(run: Path, table: str) -> Loaded:
    """Sorted distinct steps that have rows in `table`, as a one-column frame."""
    loaded = read_table(run, table, columns=["step"])
    steps = sorted({int(s) for s in loaded.frame["step"].dropna()})
    return Loaded(pd.DataFrame({"step": steps}), loaded.warnings)


def split_groups(samples: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The groups of one step's samples by their `group` column, as (label, rows by sample_idx);
    a prompt drawn twice in a step is two groups, labelled by group number."""
    if samples.empty:
        return []
    return [(f"#{int(g)} {rows['prompt_id'].iloc[0]}", rows.sort_values("sample_idx").reset_index(drop=True))
            for g, rows in samples.groupby("group", sort=True)]


def group_rewards(rows: pd.DataFrame) -> list[float]:
    """Rewards of a group's rows as floats, NaN for unscored (null) ones."""
    return [float("nan") if v is None or pd.isna(v) else float(v) for v in rows["reward"]]


def token_label(row: pd.Series) -> str:
    return (f"{row['prompt_id']} · o{int(row['sample_idx']) + 1} · t{int(row['position'])} "
            f"{str(row['token'])!r} · r={row['ratio']:.3f} · A={row['advantage']:+.3f}")


def _median(values: pd.Series) -> float | None:
    values = pd.to_numeric(values, errors="coerce").dropna()
    return float(values.median()) if len(values) else None


def _number(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


# Fields the PPO vs GRPO page compares. status.json keys first, then a scalar column of that name.
FIGURE_STATUS_KEYS = {"trained_params": ("trained_params",), "peak_memory_mb": ("peak_memory_mb",)}


def run_figures(run: RunInfo) -> tuple[dict[str, float | None], list[str]]:
    """Measured figures of one run: trained_params, peak_memory_mb, samples_per_step, seconds_per_step.

    A figure the run did not log is None.
    """
    figures: dict[str, float | None] = {}
    status = run.status or {}
    metrics = status.get("metrics") if isinstance(status.get("metrics"), dict) else {}
    for name, keys in FIGURE_STATUS_KEYS.items():
        value = None
        for key in keys:
            value = _number(status.get(key, metrics.get(key)))
            if value is not None:
                break
        figures[name] = value
    scalars = read_table(run.path, "scalars", columns=["step", "time/step_s"])
    samples = read_table(run.path, "samples", columns=["step"])
    figures["seconds_per_step"] = _median(scalars.frame["time/step_s"])
    counts = samples.frame.groupby("step").size() if len(samples.frame) else pd.Series(dtype="float64")
    figures["samples_per_step"] = _median(counts)
    return figures, scalars.warnings + samples.warnings


def latest_mtime(run: Path) -> float:
    """A cheap fingerprint of a run's tables, to key caches on (changes when a part is written)."""
    total = 0.0
    for table in ("scalars", "samples", "tokens"):
        try:
            total += os.stat(RunPaths(Path(run)).table(table)).st_mtime
        except OSError:
            pass
    return total
