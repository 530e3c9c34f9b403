"""The signed launch queue: launches that wait for a free slot (GRPO_LAB_MAX_RUNS), as files in .launcher/.

The queue outlives a dashboard restart, and anyone who can write the runs folder can plant an entry,
so an entry carries an HMAC made with a key kept outside it (launching/keys.py), is started once and
expires (keys.mark_used, MAX_ENTRY_AGE_S), and its argv meets the form's checks again before it starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Any

from grpo_lab.launching import pending_launches, process_control
from grpo_lab.launching.commands import trainer_argv
from grpo_lab.launching.form_checks import LaunchError, checked_config, parse_trainer_args
from grpo_lab.launching.keys import (MAX_ENTRY_AGE_S, entry_id, entry_signed, entry_state, entry_used, key_id, mark_used,
                                    sign_entry)
from grpo_lab.launching.launch_records import launch_folder, lock_file, read_record, record_path
from grpo_lab.rundir import runs_index
from grpo_lab.rundir.layout import write_json_atomic
from grpo_lab.rundir.reader import check_name, run_path

MAX_RUNS_ENV = "GRPO_LAB_MAX_RUNS"


def max_runs() -> int:
    """How many runs may train at once (GRPO_LAB_MAX_RUNS, default 2: a trainer uses the cores it finds)."""
    try:
        return max(1, int(os.environ.get(MAX_RUNS_ENV, "2")))
    except ValueError:
        return 2


def training(runs_dir: Path) -> int:
    """Runs training now: active run directories, and launches still starting."""
    active = {r.name for r in runs_index.listing(runs_dir).active}  # looked at now: a slot is counted once
    return len(active) + sum(1 for p in pending_launches.pending(runs_dir, active) if p.alive)


def enqueue(runs_dir: Path, name: str, argv: list[str], processes: int) -> None:
    """Write the queue entry of checked values, signed with this dashboard's key and named by it (keys.key_id)."""
    folder = launch_folder(runs_dir)
    entry = {"name": name, "queued": True, "argv": argv, "processes": processes, "queued_at": time.time(),
             "id": entry_id(), "key": key_id(runs_dir)}  # signed with the rest: started once (keys.mark_used)
    write_json_atomic(folder / f"{name}.json", {**entry, "signature": sign_entry(runs_dir, entry)})


def queue_here(runs_dir: Path, name: str) -> None:
    """Take over an entry another dashboard queued (Pending.elsewhere): nothing in it is trusted; its
    argv goes through the launch form's checks again (recheck_entry: the trainer's parser,
    allowed.check_launch, the trainer's validation), and the checked values are queued signed with
    this dashboard's key, under a new id. LaunchError (one line) when refused: the entry is left as it was."""
    check_name(name)
    with queue_lock(runs_dir):
        pend = next((p for p in pending_launches.pending(runs_dir) if p.name == name), None)
        if pend is None or not pend.elsewhere:
            raise LaunchError(f"{name} is not waiting in another dashboard's queue")
        argv, processes = recheck_entry(runs_dir, name, read_record(runs_dir, name))
        enqueue(runs_dir, name, argv, processes)


@contextlib.contextmanager
def queue_lock(runs_dir: Path):
    """Held while the queue is read and started: the scheduler (launching/scheduler.py), the Runs
    page and grpo-lab-sweep may all call start_queued at once, and one entry must start once."""
    with lock_file(runs_dir, "queue.lock") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def start_queued(runs_dir: Path) -> list[str]:
    """Start queued launches, oldest first, while slots are free; returns the names started. The
    queue is files in .launcher/, so it outlives a dashboard restart, and anyone who can write
    there can plant an entry: one changed since this dashboard signed it is refused at once; one
    signed with another key, or none, is never started here, nor refused: another dashboard over
    the same folder (another GRPO_LAB_KEY_DIR) starts its own, and the Runs page says so and offers
    to queue it here (checked again: queue_here) or dismiss it. A signed one is checked again, as
    the form's values are, before it starts (the data folders, reward modules or limits may have
    changed since it was queued). The dashboard's scheduler calls this every few seconds, so the
    queue moves with no page open."""
    if not any(p.queued for p in pending_launches.pending(runs_dir)):
        return []  # nothing waits: no lock taken, no .launcher folder made
    with queue_lock(runs_dir):
        return _start_queued(runs_dir)


def _start_queued(runs_dir: Path) -> list[str]:
    started = []
    queued = sorted((p for p in pending_launches.pending(runs_dir) if p.queued), key=lambda p: p.started_at)
    for entry in queued:  # this dashboard's (another dashboard's wait for it: pending's `elsewhere`)
        record = read_record(runs_dir, entry.name)
        if not entry_signed(runs_dir, record) or record.get("name") != entry.name:
            refuse(runs_dir, entry.name, record, "this queue entry was changed since this dashboard signed it (no "
                   "valid signature); it was not started")
        elif (why := replayed_or_expired(record, time.time(), runs_dir)) is not None:
            refuse(runs_dir, entry.name, record, why)
    for entry in queued:
        if training(runs_dir) >= max_runs():
            break
        record = read_record(runs_dir, entry.name)
        if not record.get("queued") or record.get("refused"):
            continue
        try:
            argv, processes = recheck_entry(runs_dir, entry.name, record)
            if (why := replayed_or_expired(record, time.time(), runs_dir)) is not None:
                raise LaunchError(why)
            # before the start: never started twice, even after a crash (offered again once when it never started)
            mark_used(record["id"], time.time(), "retried" if entry_state(record["id"]) == "marked" else "marked")
            process_control.start_process(runs_dir, entry.name, argv, processes)
            mark_used(record["id"], time.time(), "started")
        except (LaunchError, ValueError) as exc:  # ValueError: a run name refused by run_path
            refuse(runs_dir, entry.name, record, str(exc))
            continue
        started.append(entry.name)
    return started


def refuse(runs_dir: Path, name: str, record: dict[str, Any], reason: str) -> None:
    """Mark a queued entry refused (shown by pending and launch_log), so it is never started."""
    write_json_atomic(record_path(runs_dir, name), {**record, "name": name, "queued": False, "pid": 0, "refused": reason})


def never_started(runs_dir: Path, name: Any) -> bool:
    """A queued entry marked used whose trainer never started: the dashboard was killed between marking
    it and starting it. The entry still says queued (a start replaces it with the trainer's pid), and
    there is no run folder and no trainer of that name."""
    try:
        path = run_path(runs_dir, name)
    except (ValueError, TypeError):
        return False
    return not os.path.lexists(path) and not process_control.alive_launch(runs_dir, name)


def replayed_or_expired(record: dict[str, Any], now: float, runs_dir: Path | None = None) -> str | None:
    """Why a signed entry is not started, in one line: it has no id (an older dashboard's), it was
    started already (a copy put back), or it waited longer than MAX_ENTRY_AGE_S; None when it may start.
    Given `runs_dir`, an entry marked used once but never started (never_started) is offered again, once."""
    ident, queued_at = record.get("id"), record.get("queued_at")
    if not isinstance(ident, str) or not ident:
        return "this queue entry has no id (queued by an older version?); it was not started: launch it again"
    lost = (runs_dir is not None and entry_state(ident) == "marked" and record.get("queued") is True
            and never_started(runs_dir, record.get("name")))
    if entry_used(ident) and not lost:
        return "this queue entry was started once already (a copy put back?); a queue entry starts one run, once"
    if not isinstance(queued_at, (int, float)) or not 0 <= now - queued_at <= MAX_ENTRY_AGE_S:
        return (f"this queue entry expired: queued more than {MAX_ENTRY_AGE_S // 86400} days ago (or at no valid "
                "time); it was not started: launch it again")
    return None


def recheck_entry(runs_dir: Path, name: str, record: dict[str, Any]) -> tuple[list[str], int]:
    """A queued entry's argv read back into values with the trainer's own parser, then through
    checked_config; returns the argv to start (rebuilt from the checked values) and the count."""
    argv, processes = record.get("argv"), record.get("processes", 1)
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise LaunchError("argv: must be a list of strings")
    values = parse_trainer_args(argv)
    for option in ("config", "runs_dir", "resume"):  # the form never queues these
        if option in values:
            raise LaunchError(f"{option}: not something the launch form queues")
    cfg = checked_config(values, runs_dir, processes)
    if cfg.name != name:
        raise LaunchError(f"name: the entry {name}.json starts a run named {cfg.name!r}")
    if os.path.lexists(run_path(runs_dir, name)):  # lexists: a dangling link is taken too
        raise LaunchError(f"name: a run named {name!r} already exists")
    return trainer_argv(values), processes
