"""RUN/rescores/<name>/: a run's completions scored again with other rewards (grpo_lab/finished_runs/rescore.py writes it).

The folder's layout, its atomic write and its readers (the Groups page); docs/run-directory.md,
"rescores/", is the contract. Everything read here is input: opened only as a regular file inside
the run (reader.open_regular), a name only when it could be a run name.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from grpo_lab.rundir import json_file
from grpo_lab.rundir.layout import valid_run_name, write_json_atomic
from grpo_lab.rundir.reader import open_regular

RESCORES = "rescores"  # RUN/rescores/<name>/
SAMPLES_FILE, SUMMARY_FILE = "samples.parquet", "summary.json"
MAX_SUMMARY_BYTES = 1 << 20


SUMMARY_DEPTH = 8  # summary.json nests 3 levels (reward_params.<reward>.<param>); a list value one more
# the samples table's columns the page reads, and the Arrow types each may have


class WriteError(OSError):
    """The folder could not be written; nothing of it is left, and a replaced rescore is back."""


def folder(run_dir: str | Path, create: bool = False) -> Path:
    """RUN/rescores, a real folder of the run; WriteError (one line) when it is anything else: a
    symlink (a rescore would be written, and read, outside the run), a file. Missing: made when
    `create`, else returned as it is (nothing to list)."""
    run_dir = Path(run_dir)
    path = run_dir / RESCORES
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        if create:
            path.mkdir()
        return path
    if stat.S_ISLNK(mode):
        raise WriteError(f"{RESCORES}/ in run {run_dir.name} is a symlink; rescores are kept inside the run: "
                         f"move it away and rescore again")
    if not stat.S_ISDIR(mode):
        raise WriteError(f"{RESCORES} in run {run_dir.name} is not a folder; move it away and rescore again")
    return path


def write(run_dir: Path, name: str, table: pd.DataFrame, summary: dict, force: bool) -> None:
    """The folder built under .tmp-* and renamed into place: a reader sees all of it or none."""
    folder_ = folder(run_dir, create=True)
    tmp = folder_ / f".tmp-{name}-{os.getpid()}-{time.monotonic_ns()}"
    tmp.mkdir()
    old = None
    try:
        # rows in step order, in row groups of 64k: a reader of one group skips the others (read_group)
        pq.write_table(pa.Table.from_pandas(table, preserve_index=False), tmp / SAMPLES_FILE, row_group_size=1 << 16)
        write_json_atomic(tmp / SUMMARY_FILE, summary)
        target = folder_ / name
        if target.exists() and force:
            old = folder_ / f".tmp-old-{name}-{os.getpid()}-{time.monotonic_ns()}"
            os.rename(target, old)
        os.rename(tmp, target)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not (folder_ / name).exists():
            os.rename(old, folder_ / name)  # the replaced result comes back: nothing already written is lost
        raise WriteError(f"cannot write {RESCORES}/{name} in run {run_dir.name}: {exc.strerror or exc}") from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# --- reading back (the Groups page) ----------------------------------------------------------


def list_rescores(run_dir: str | Path) -> list[str]:
    """The rescores of a run, newest first (names of folders with a summary); none when RUN/rescores
    is not a real folder of the run."""
    try:
        found = [p for p in folder(run_dir).iterdir() if valid_run_name(p.name) and (p / SUMMARY_FILE).is_file()]
    except OSError:
        return []
    return [p.name for p in sorted(found, key=lambda p: (p / SUMMARY_FILE).stat().st_mtime, reverse=True)]


def read_summary(run_dir: str | Path, name: str) -> dict | None:
    """A rescore's summary.json, or None when read_summary_checked refuses it."""
    return read_summary_checked(run_dir, name)[0]


def read_summary_checked(run_dir: str | Path, name: str) -> tuple[dict | None, str | None]:
    """(summary.json, None), or (None, one line saying why not): missing, not a regular file inside the
    run, not JSON, too deep, or a field of another type than rescore.py writes (the page formats them)."""
    if not valid_run_name(name):
        return None, f"{name!r} is not a rescore's name"
    try:
        folder(run_dir)
        with open_regular(Path(run_dir) / RESCORES / name / SUMMARY_FILE, run_dir) as fh:
            raw = fh.read(MAX_SUMMARY_BYTES + 1)
        if len(raw) > MAX_SUMMARY_BYTES:
            return None, f"{SUMMARY_FILE} is larger than {MAX_SUMMARY_BYTES >> 10} KB, so it is not read"
        data = json_file.parse(raw, SUMMARY_FILE, SUMMARY_DEPTH)
    except (OSError, ValueError) as exc:
        return None, (str(exc).splitlines() or [type(exc).__name__])[0][:200]
    problem = check_summary(data)
    return (None, problem) if problem else (data, None)


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _text(v: Any) -> bool:
    return isinstance(v, str)


def _real_or_none(v: Any) -> bool:
    return v is None or _real(v)


# summary.json's fields the page formats, as rescore.summarize writes them: a field -> the check of its value,
# or of each value of a mapping ("*": every key; else the keys named). A field may be missing (older
# rescores), never of another type.
SUMMARY_FIELDS: dict[str, Any] = {
    "samples": _count, "steps": _count, "groups": _count, "reward_changed": _count, "unscored": _count,
    "std_mode": _text, "run": _text, "seconds": _real,
    "rewards": {"*": _real}, "errors": {"*": _count}, "first_error": {"*": _text},
    "sign_flips": {"groups": _count, "samples": _count},
    "signal": {"run": _count, "rescore": _count, "gained": _count, "lost": _count},
    "reward_mean": {"run": _real_or_none, "rescore": _real_or_none},
}


def check_summary(data: Any) -> str | None:
    """One line naming the first field of `data` that is not what rescore.summarize writes; None when fine.

    >>> check_summary({"samples": 4, "rewards": {"length": 1.0}}) is None
    True
    >>> check_summary({"rewards": {"length": "x"}})
    'summary.json: rewards.length is not what a rescore writes (got str)'
    """
    if not isinstance(data, dict):
        return f"{SUMMARY_FILE} holds {type(data).__name__}, not a JSON object"
    for field, check in SUMMARY_FIELDS.items():
        if field not in data:
            continue
        value = data[field]
        if not isinstance(check, dict):
            items = [(field, value, check)]
        elif not isinstance(value, dict):
            return f"{SUMMARY_FILE}: {field} is not what a rescore writes (got {type(value).__name__})"
        elif "*" in check:
            items = [(f"{field}.{k}", v, check["*"]) for k, v in value.items()]
        else:
            items = [(f"{field}.{k}", value[k], test) for k, test in check.items() if k in value]
        for where, v, test in items:
            if not test(v):
                return f"{SUMMARY_FILE}: {where} is not what a rescore writes (got {type(v).__name__})"
    return None


def _number(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_null(t)


# the samples table's columns the page reads, and the Arrow types each may have
COLUMN_TYPES = {"step": pa.types.is_integer, "group": pa.types.is_integer, "sample_idx": pa.types.is_integer,
                "reward": _number, "advantage": _number, "reward_changed": pa.types.is_boolean,
                "sign_flipped": pa.types.is_boolean}


def read_group(run_dir: str | Path, name: str, step: int, group: int) -> pd.DataFrame:
    """A rescore's rows of one group, by sample_idx (empty when unreadable)."""
    return read_group_checked(run_dir, name, step, group)[0]


def read_group_checked(run_dir: str | Path, name: str, step: int, group: int) -> tuple[pd.DataFrame, str | None]:
    """(a rescore's rows of one group, by sample_idx; None), or (empty, one line saying why not): the
    columns the page reads are checked against COLUMN_TYPES (a planted table without sample_idx, or with
    it as text, is refused here, not in the page's merge)."""
    if not valid_run_name(name):
        return pd.DataFrame(), f"{name!r} is not a rescore's name"
    try:
        folder(run_dir)
        with open_regular(Path(run_dir) / RESCORES / name / SAMPLES_FILE, run_dir) as fh:
            schema = pq.read_schema(fh)
            for column, ok in COLUMN_TYPES.items():
                if column not in schema.names:
                    return pd.DataFrame(), f"{SAMPLES_FILE} has no column {column}, so it is not shown"
                if not ok(schema.field(column).type):
                    return pd.DataFrame(), (f"{SAMPLES_FILE}: column {column} is {schema.field(column).type}, not what "
                                            "a rescore writes, so it is not shown")
            extra = [c for c in schema.names if c.startswith("rewards/") and not _number(schema.field(c).type)]
            if extra:
                return pd.DataFrame(), f"{SAMPLES_FILE}: column {extra[0]} is not numbers, so it is not shown"
            fh.seek(0)
            table = pq.read_table(fh, filters=[("step", "=", int(step)), ("group", "=", int(group))])
    except (OSError, ValueError, pa.ArrowException) as exc:
        return pd.DataFrame(), (str(exc).splitlines() or [type(exc).__name__])[0][:200]
    return table.to_pandas().sort_values("sample_idx").reset_index(drop=True), None
