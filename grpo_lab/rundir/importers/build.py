"""Writing an imported run: all of it into a temporary folder beside the target, renamed into
place at the end, so a failed import leaves nothing behind and a reader never sees half a run."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from grpo_lab.rundir.layout import RunPaths, write_json_atomic
from grpo_lab.rundir.reader import run_path
from grpo_lab.rundir.status import StatusFile
from grpo_lab.rundir.writer import RunWriter, TableWriter


class SourceError(ValueError):
    """The source cannot be read: the message names the file and what was expected there."""


def build_run(runs_dir: str | Path, name: str, fill: Callable[[RunPaths], None]) -> Path:
    """Create `runs_dir/name` by calling fill(paths) on a temporary folder, then renaming it."""
    target = run_path(runs_dir, name)  # refuses names that are not one plain folder name
    if target.exists():
        raise SourceError(f"{target}: a run of that name exists already; choose another --name")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-import-{name}-", dir=target.parent))
    try:
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # mkdtemp makes it private; a run folder is as readable as any other
        fill(RunPaths(tmp))
        os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def open_writer(paths: RunPaths, flush_seconds: float = float("inf")) -> RunWriter:
    """Scalars and samples only: other trainers give no ratio histograms or token detail."""
    writer = RunWriter(paths, level="off", flush_seconds=flush_seconds)
    writer.tables = {name: TableWriter(paths.table(name), compact_every=50) for name in ("scalars", "samples")}
    return writer


def scalar_row(step: int, when: float | None, start: float | None, values: dict[str, float]) -> dict[str, pa.Array]:
    """One row of tables/scalars: step, time and wall_s (NaN when unknown), then the metrics."""
    known = when is not None and start is not None
    row = {"step": pa.array([step], pa.int64()),
           "time": pa.array([when if when is not None else math.nan], pa.float64()),
           "wall_s": pa.array([when - start if known else math.nan], pa.float64())}
    row.update({k: pa.array([v], pa.float64()) for k, v in values.items()})
    return row


def finish(paths: RunPaths, config: dict[str, Any], *, step: int, total_steps: int,
           started_at: float | None, updated_at: float | None) -> None:
    """config.json, and a status.json that says finished (an import is a finished run)."""
    write_json_atomic(paths.config, config)
    status = StatusFile(paths.status, **{k: config.get(k) for k in ("name", "algo", "model", "task", "source")})
    now = time.time()
    status.data.update(state="finished", pid=None, step=step, total_steps=total_steps,
                       started_at=started_at or now, updated_at=updated_at or now)
    write_json_atomic(paths.status, status.data)
