"""Read the few numbers the concept demos take from a run directory (docs/run-directory.md).

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
import pyarrow as pa
import pyarrow.parquet as pq

from rundir.layout import RunPaths, default_runs_dir, read_json, visible_parts


@dataclass(frozen=True)
class RunInfo:
    name: str
    path: Path
    algo: str  # "grpo", "ppo", or "?" when config.json is unreadable
    config: dict[str, Any]
    status: dict[str, Any]
    mtime: float


@dataclass
class Loaded:
    """A table (possibly empty) and what went wrong while reading it."""

    frame: pd.DataFrame
    warnings: list[str] = field(default_factory=list)


def runs_root() -> Path:
    return Path(default_runs_dir())


def list_runs(root: Path | None = None) -> list[RunInfo]:
    """Run directories under `root` (those with a config.json or status.json), newest first."""
    root = runs_root() if root is None else Path(root)
    try:
        entries = [p for p in root.iterdir() if not p.name.startswith(".")]
    except OSError:
        return []
    runs = []
    for path in entries:
        paths = RunPaths(path)
        config = read_json(paths.config) or {}
        status = read_json(paths.status) or {}
        if not config and not status:
            continue
        mtimes = []
        for f in (paths.config, paths.status):
            try:
                mtimes.append(f.stat().st_mtime)
            except OSError:
                pass
        algo = str(config.get("algo") or status.get("algo") or "?")
        runs.append(RunInfo(path.name, path, algo, config, status, max(mtimes, default=0.0)))
    return sorted(runs, key=lambda r: (-r.mtime, r.name))


def read_table(run: Path, table: str, columns: list[str] | None = None,
               step: int | None = None) -> Loaded:
    """The rows of one table (optionally of one step), read part by part.

    A part that vanished (compaction) is skipped quietly; one that cannot be read is skipped with
    a warning. Columns a part lacks come back as missing values.
    """
    warnings: list[str] = []
    frames = []
    for part in visible_parts(RunPaths(Path(run)).table(table)):
        try:
            schema = pq.read_schema(part)
            cols = None if columns is None else [c for c in columns if c in schema.names]
            filters = [("step", "=", step)] if step is not None and "step" in schema.names else None
            frames.append(pq.read_table(part, columns=cols, filters=filters).to_pandas())
        except FileNotFoundError:
            continue
        except (OSError, pa.ArrowException, ValueError) as exc:
            warnings.append(f"{table}/{part.name}: unreadable ({type(exc).__name__}: {exc})")
    frames = [f for f in frames if len(f)]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if columns is not None:
        for col in columns:
            if col not in frame.columns:
                frame[col] = pd.Series(dtype="float64")
    return Loaded(frame, warnings)


def steps_with(run: Path, table: str) -> Loaded:
    """Sorted distinct steps that have rows in `table`, as a one-column frame."""
    loaded = read_table(run, table, columns=["step"])
    steps = sorted({int(s) for s in loaded.frame["step"].dropna()})
    return Loaded(pd.DataFrame({"step": steps}), loaded.warnings)


def split_groups(samples: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The groups of one step's samples, in file order, as (label, rows sorted by sample_idx).

    A group is the rows of one prompt_id; a prompt drawn twice in a step gives two runs of
    sample_idx 0..G-1, told apart by where sample_idx starts again ("3+4 (2)").
    """
    if samples.empty:
        return []
    group_no = []
    seen: dict[str, int] = {}
    last_idx: dict[str, int] = {}
    for pid, idx in zip(samples["prompt_id"].astype(str), samples["sample_idx"]):
        if pid not in seen:
            seen[pid] = 1
        elif idx <= last_idx[pid]:
            seen[pid] += 1
        last_idx[pid] = idx
        group_no.append(seen[pid])
    keyed = samples.assign(_group=group_no, _pid=samples["prompt_id"].astype(str))
    out = []
    for (pid, no), rows in keyed.groupby(["_pid", "_group"], sort=False):
        label = pid if no == 1 else f"{pid} ({no})"
        out.append((label, rows.drop(columns=["_group", "_pid"]).sort_values("sample_idx").reset_index(drop=True)))
    return out


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
    metrics = run.status.get("metrics") if isinstance(run.status.get("metrics"), dict) else {}
    for name, keys in FIGURE_STATUS_KEYS.items():
        value = None
        for key in keys:
            value = _number(run.status.get(key, metrics.get(key)))
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
