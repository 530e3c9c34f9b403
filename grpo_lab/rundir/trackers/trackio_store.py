"""trackio: Hugging Face's local-first tracker. A run goes to its local store (a SQLite file per project in
TRACKIO_DIR, by default ~/.cache/huggingface/trackio), under project TRACKIO_PROJECT (default grpo-lab) and
the run's name; `trackio show` draws it. Read back with trackio's own SQLiteStorage.

trackio takes its store's folder from TRACKIO_DIR once, when it is first imported: a reader of another
store sets it before that (grpo-lab-import does, from its SOURCE).
"""

from __future__ import annotations

import math
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from grpo_lab.rundir.trackers.logged import Logged

PROJECT = "grpo-lab"
TABLE_KEY = "completions"


def project() -> str:
    return os.environ.get("TRACKIO_PROJECT") or PROJECT


class TrackioSink:
    def __init__(self, run_name: str, config: dict[str, Any]):
        import trackio  # noqa: PLC0415 - ImportError without it

        self.trackio = trackio
        # no system metrics: they would be rows of their own, and a CPU sampler thread besides the run's
        self.run = trackio.init(project=project(), name=run_name, config=config, embed=False,
                                 auto_log_cpu=False, auto_log_gpu=False)

    def scalars(self, step: int, time: float, values: dict[str, float]) -> None:
        self.run.log(values, step=step)

    def table(self, step: int, columns: dict[str, list]) -> None:
        rows = [list(r) for r in zip(*columns.values())]
        self.run.log({TABLE_KEY: self.trackio.Table(columns=list(columns), data=rows)}, step=step)

    def close(self) -> None:
        self.run.finish()


def open_sink(run_dir: Path, run_name: str, config: dict[str, Any]) -> TrackioSink:
    return TrackioSink(run_name, config)


def store(folder: Path | None) -> None:
    """Read from the store in `folder`: TRACKIO_DIR before trackio's first import; refused once imported elsewhere."""
    import sys  # noqa: PLC0415

    if folder is None:
        return
    if "trackio" in sys.modules:
        from trackio import utils  # noqa: PLC0415

        if Path(utils.TRACKIO_DIR).resolve() != folder.resolve():
            raise ValueError(f"{folder}: trackio reads {utils.TRACKIO_DIR} in this process (TRACKIO_DIR)")
        return
    os.environ["TRACKIO_DIR"] = str(folder)


def read(project_name: str, run: str, folder: Path | None = None) -> Logged:
    """The run's scalars, times, config and completions tables from trackio's store (`folder`, else TRACKIO_DIR)."""
    store(folder)
    from trackio import SQLiteStorage  # noqa: PLC0415

    rows = SQLiteStorage.get_logs(project_name, run)
    if not rows and run not in SQLiteStorage.get_runs(project_name):
        raise FileNotFoundError(f"trackio: no run {run!r} in project {project_name!r}")
    out = Logged(config=SQLiteStorage.get_run_config(project_name, run))
    for row in rows:
        step = int(row["step"])
        if row.get("timestamp"):
            out.times[step] = datetime.fromisoformat(row["timestamp"]).timestamp()
        for key, value in row.items():
            if key in ("step", "timestamp"):
                continue
            if isinstance(value, dict) and value.get("_type") == "trackio.table":
                out.tables[step] = list(value.get("_value") or [])
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                out.add(step, key, float(value))
            elif value is None:  # a NaN may come back as null
                out.add(step, key, math.nan)
    if out.config:  # trackio adds its own entries (_Username, _Created)
        out.config = {k: v for k, v in out.config.items() if not k.startswith("_")}
    return out
