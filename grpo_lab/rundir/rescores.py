"""RUN/rescores/<name>/: a run's completions scored again with other rewards (grpo_lab/rescore.py writes it).

The folder's layout, its atomic write and its readers (the Groups page); docs/run-directory.md,
"rescores/", is the contract. Everything read here is input: opened only as a regular file inside
the run (reader.open_regular), a name only when it could be a run name.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from grpo_lab.rundir.layout import valid_run_name, write_json_atomic
from grpo_lab.rundir.reader import open_regular

RESCORES = "rescores"  # RUN/rescores/<name>/
SAMPLES_FILE, SUMMARY_FILE = "samples.parquet", "summary.json"


class WriteError(OSError):
    """The folder could not be written; nothing of it is left, and a replaced rescore is back."""


def write(run_dir: Path, name: str, table: pd.DataFrame, summary: dict, force: bool) -> None:
    """The folder built under .tmp-* and renamed into place: a reader sees all of it or none."""
    folder = run_dir / RESCORES
    folder.mkdir(exist_ok=True)
    tmp = folder / f".tmp-{name}-{os.getpid()}-{time.monotonic_ns()}"
    tmp.mkdir()
    old = None
    try:
        # rows in step order, in row groups of 64k: a reader of one group skips the others (read_group)
        pq.write_table(pa.Table.from_pandas(table, preserve_index=False), tmp / SAMPLES_FILE, row_group_size=1 << 16)
        write_json_atomic(tmp / SUMMARY_FILE, summary)
        target = folder / name
        if target.exists() and force:
            old = folder / f".tmp-old-{name}-{os.getpid()}-{time.monotonic_ns()}"
            os.rename(target, old)
        os.rename(tmp, target)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not (folder / name).exists():
            os.rename(old, folder / name)  # the replaced result comes back: nothing already written is lost
        raise WriteError(f"cannot write {RESCORES}/{name} in run {run_dir.name}: {exc.strerror or exc}") from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# --- reading back (the Groups page) ----------------------------------------------------------


def list_rescores(run_dir: str | Path) -> list[str]:
    """The rescores of a run, newest first (names of folders with a summary)."""
    folder = Path(run_dir) / RESCORES
    try:
        found = [p for p in folder.iterdir() if valid_run_name(p.name) and (p / SUMMARY_FILE).is_file()]
    except OSError:
        return []
    return [p.name for p in sorted(found, key=lambda p: (p / SUMMARY_FILE).stat().st_mtime, reverse=True)]


def read_summary(run_dir: str | Path, name: str) -> dict | None:
    """A rescore's summary.json, or None when it is missing, not a regular file inside the run, or not JSON."""
    if not valid_run_name(name):
        return None
    try:
        with open_regular(Path(run_dir) / RESCORES / name / SUMMARY_FILE, run_dir) as fh:
            data = json.loads(fh.read(1 << 20))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_group(run_dir: str | Path, name: str, step: int, group: int) -> pd.DataFrame:
    """A rescore's rows of one group, by sample_idx (empty when unreadable)."""
    if not valid_run_name(name):
        return pd.DataFrame()
    try:
        with open_regular(Path(run_dir) / RESCORES / name / SAMPLES_FILE, run_dir) as fh:
            table = pq.read_table(fh, filters=[("step", "=", int(step)), ("group", "=", int(group))])
    except (OSError, pa.ArrowException):
        return pd.DataFrame()
    return table.to_pandas().sort_values("sample_idx").reset_index(drop=True)
