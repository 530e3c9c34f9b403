"""Writing an imported run: all of it into a temporary folder beside the target, renamed into
place at the end, so a failed import leaves nothing behind and a reader never sees half a run."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
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


# --- the step loop of the importers that read one file per step (verl, NeMo-RL, prime-rl) ----------------

Rows = list[dict[str, Any]]
Members = list[list[int]]  # each group's row indices in the step's file


@dataclass
class Seen:
    """What the step loop saw, for config.json: how often each group size came, the first step's groups."""

    sizes: Counter[int] = field(default_factory=Counter)
    prompts_first_step: int = 0


def write_steps(paths: RunPaths, files: list[tuple[int, Path]], *, read: Callable[[Path], Rows],
                group: Callable[[Rows, Path], Members],
                tables: Callable[[int, Rows, Members], tuple[dict[str, pa.Array], dict[str, float]]]) -> Seen:
    """Each (step, file): its rows read, grouped, and turned by `tables` into the step's samples columns and
    scalars; both written and flushed before the next file (time and wall_s from the files' mtimes)."""
    writer = open_writer(paths)
    start, seen = files[0][1].stat().st_mtime, Seen()
    for step, path in files:
        rows = read(path)
        members = group(rows, path)
        seen.sizes.update(len(m) for m in members)
        seen.prompts_first_step = seen.prompts_first_step or len(members)
        columns, scalars = tables(step, rows, members)
        writer.log("samples", columns)
        writer.log("scalars", scalar_row(step, path.stat().st_mtime, start, scalars))
        writer.flush()
    writer.close()
    return seen


def finish_steps(paths: RunPaths, folder: Path, files: list[tuple[int, Path]], seen: Seen,
                 **fields: Any) -> None:
    """config.json and a finished status.json for a run `write_steps` wrote from `folder`; `fields`: name,
    source (the framework), advantage_source, task and what else the format knows."""
    last = files[-1][0]
    config = {"algo": "grpo", "model": "unknown", **fields, "group_size": seen.sizes.most_common(1)[0][0],
              "prompts_per_step": seen.prompts_first_step, "max_steps": last, "token_detail_groups": 0,
              "rewards": {}, "imported_from": str(folder.resolve())}
    finish(paths, config, step=last, total_steps=last, started_at=files[0][1].stat().st_mtime,
           updated_at=files[-1][1].stat().st_mtime)
