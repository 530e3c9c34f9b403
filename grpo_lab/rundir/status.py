"""status.json: what a run is doing now. Written atomically by the trainer, read by anyone.

Besides its `state`, a run says what it is busy with where that takes long, so a reader never sees a
silent "starting · 0/N" or "running" for minutes (docs/run-directory.md):
- `phase`: before the first step, {"name": "warm_start", "done": i, "total": N}; null otherwise;
- `waiting`: while the `human` reward waits, {"for": "ratings", "step": S, "since": t, "deadline": t
  or null, "groups": n, "need": k}; null otherwise.
A reader that finds the process gone drops both: a dead trainer waits for nothing.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grpo_lab.rundir import json_file
from grpo_lab.rundir.layout import SCHEMA_VERSION, full_disk, write_json_atomic

STATES = ("starting", "running", "finished", "failed", "stopped")
ACTIVE_STATES = ("starting", "running")
_OPEN: dict[Path, "StatusFile"] = {}  # this process's status files by path: the human reward's wait goes through them


class StatusFile:
    """The trainer's handle on status.json; every update rewrites the whole file atomically."""

    def __init__(self, path: Path, **fields: Any):
        self.path = Path(path)
        now = time.time()
        self.data: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "state": "starting",
            "pid": os.getpid(),
            "step": 0,
            "total_steps": 0,
            "started_at": now,
            "updated_at": now,
            "error": None,
            **fields,
        }
        _OPEN[self.path.resolve()] = self

    def update(self, **fields: Any) -> None:
        if "state" in fields and fields["state"] not in STATES:
            raise ValueError(f"state: must be one of {STATES}, got {fields['state']!r}")
        self.data.update(fields, updated_at=time.time())
        write_json_atomic(self.path, self.data)


def set_waiting(run_dir: str | Path, waiting: dict[str, Any] | None) -> None:
    """Say in the run's status.json that the trainer waits (the `human` reward: `waiting` as the module
    docstring says), or no longer does (None). Through this process's own StatusFile, so the trainer's
    next update keeps it; nothing when this process does not write the run's status (a test, rank > 0)."""
    status = _OPEN.get((Path(run_dir) / "status.json").resolve())
    if status is not None:
        status.update(waiting=waiting)


def pid_alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) is not alive for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def read_status(path: Path) -> dict[str, Any] | None:
    """status.json as written, plus `alive`; an active state whose process is gone reads as failed.

    A trainer killed with SIGKILL cannot write its own epitaph, so the reader supplies it; nor can
    one whose disk filled beyond its reserve (rundir.layout.make_reserve): then the epitaph says so.
    """
    return read_status_checked(path)[0]


def read_status_checked(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(read_status's mapping, None), or (None, the line saying why status.json was not read: too
    large, too deep, not JSON; None when it is simply missing). A mapping with fields left out
    (checked_fields) comes with the line naming them."""
    data, problem = read_written(path)
    if data is None:
        return None, problem
    return judged(data, path), problem


def read_written(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """status.json as written, its fields checked (checked_fields): (mapping, None or the line naming
    the fields left out), or (None, why it was not read)."""
    data, problem = json_file.read(path)
    return (None, problem) if data is None else checked_fields(data)


# What the trainer writes in each field a reader uses (StatusFile, run.py): a field holding anything else
# is left out, so a planted {"x": 1} state, a started_at of 1e308 or NaN, or a total_steps of -1 reads as
# missing rather than taking a page down (a timestamp out of range, a progress bar below 0).
MAX_TIME = 1e11  # seconds since 1970: the year 5138; datetime cannot show 1e20


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _seconds(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v < MAX_TIME


FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "state": (lambda v: v in STATES, f"one of {', '.join(STATES)}"),
    "step": (_count, "a whole number >= 0"),
    "total_steps": (_count, "a whole number >= 0"),
    "started_at": (_seconds, "a time in seconds since 1970"),
    "updated_at": (_seconds, "a time in seconds since 1970"),
    "pid": (lambda v: v is None or _count(v), "a process id"),
    "error": (lambda v: v is None or isinstance(v, str), "text"),
    "stop_reason": (lambda v: v is None or isinstance(v, str), "text"),
    "world_size": (lambda v: _count(v) and v >= 1, "a whole number >= 1"),
    "train_seconds": (lambda v: _seconds(v), "seconds"),
    "peak_memory_mb": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                       and v >= 0, "a number >= 0"),
    "findings": (lambda v: v is None or (isinstance(v, dict) and all(_count(n) for n in v.values())),
                 "counts per severity"),
    "phase": (lambda v: v is None or isinstance(v, dict), "a mapping or null"),
    "waiting": (lambda v: v is None or isinstance(v, dict), "a mapping or null"),
}


def checked_fields(written: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """`written` without the fields that hold what the trainer never writes there (FIELDS), and one line
    naming the first of them (and how many more), or None.

    >>> checked_fields({"state": "running", "started_at": float("inf")})
    ({'state': 'running'}, 'status.json: started_at is inf, not a time in seconds since 1970; left out')
    """
    bad = [k for k, (ok, _) in FIELDS.items() if k in written and not ok(written[k])]
    if not bad:
        return written, None
    first = bad[0]
    more = f" (and {', '.join(bad[1:])})" if bad[1:] else ""
    line = f"status.json: {first} is {str(written[first])[:80]}, not {FIELDS[first][1]}; left out{more}"
    return {k: v for k, v in written.items() if k not in bad}, line


def judged(written: dict[str, Any], path: Path) -> dict[str, Any]:
    """status.json's mapping as `written` (left as it is), judged now: a new mapping with `alive`, and
    an active state whose process is gone read as failed (read_status). A listing that keeps what it
    read (rundir/runs_index.py) judges it again while the process was alive at the last look."""
    data = dict(written)
    alive = pid_alive(data.get("pid"))
    data["alive"] = alive
    if not alive:
        data["phase"] = data["waiting"] = None
    if data.get("state") in ACTIVE_STATES and not alive:
        data["state"] = "failed"
        if not data.get("error"):
            full = full_disk(Path(path).parent)
            data["error"] = (f"trainer process ended without reporting, on a full disk: {full}" if full
                             else "trainer process ended without reporting (killed?)")
    return data
