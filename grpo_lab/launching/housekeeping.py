"""Deleting and archiving runs: moved, never removed at once.

Delete moves `<runs>/<name>` to `<runs>/.trash/<name>@<UTC time>` (restorable until the trash is
emptied); archive moves it to `<runs>/.archive/<name>` (hidden from the list, unarchived on demand).
Both folders start with '.', which no run name may, so every reader of the runs folder (the listing,
Compare, sweeps, the launch queue) skips them without knowing they exist. The run's launch record
and output (`.launcher/<name>.json`, `.log`) move along into the holding folder's own `.launcher/`:
left behind, the record of a run without a folder would show as a launch that failed to start.

A run is refused while it trains: its trainer holds `<run>/.lock` (layout.RunLock) for its whole
life, so the lock is the test, and it is held here while the folder moves, so a resume cannot start
in between. A queued or still-starting launch is refused too, each with one line saying why.
"""

from __future__ import annotations

import calendar
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from grpo_lab.launching import launch_records, process_control
from grpo_lab.rundir.layout import RunLock, read_json
from grpo_lab.rundir.reader import RunInfo, check_name, list_runs, read_run, run_path
from grpo_lab.rundir.status import ACTIVE_STATES, read_status

TRASH = ".trash"
ARCHIVE = ".archive"
STAMP = "%Y%m%dT%H%M%SZ"


class HousekeepingError(ValueError):
    """A move that was refused; the message says why in one line."""


@dataclass
class Trashed:
    """One entry of the trash: the run as it was, under the entry name `<name>@<time>`."""

    entry: str
    name: str
    trashed_at: float | None
    info: RunInfo


def holding_folder(runs_dir: Path, which: str) -> Path:
    """`<runs>/.trash` or `<runs>/.archive`, created; refused when it is a symlink or a file (the runs
    this page moves would land somewhere else)."""
    folder = Path(runs_dir) / which
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise HousekeepingError(f"{folder} is not a folder (a symlink?); remove it to delete or archive runs")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _refuse_if_busy(runs_dir: Path, name: str, verb: str) -> None:
    record = launch_records.read_record(runs_dir, name)
    if record.get("queued") and not record.get("refused"):
        raise HousekeepingError(f"{name} is queued: it cannot be {verb}; dismiss it from the queue instead")
    if process_control.alive_launch(Path(runs_dir), name):
        raise HousekeepingError(f"{name} is still starting: stop it first, then it can be {verb}")
    if read_run(runs_dir, name).state in ACTIVE_STATES:
        raise HousekeepingError(f"{name} is running: stop it first, then it can be {verb}")


def _move_launch_files(src_runs: Path, src_name: str, dst_runs: Path, dst_name: str) -> None:
    for suffix in (".json", ".log"):
        src = launch_records.record_path(src_runs, src_name, suffix)
        dst = dst_runs / launch_records.LAUNCH_DIR
        if src.is_file() and not src.is_symlink() and not dst.is_symlink():
            dst.mkdir(exist_ok=True)
            os.replace(src, dst / f"{dst_name}{suffix}")


def _move_run(runs_dir: Path, name: str, dst_root: Path, dst_name: str, verb: str) -> Path:
    """Move run `name` (checked idle, locked while it moves) to dst_root/dst_name, with its launch files."""
    runs_dir = Path(runs_dir)
    path = run_path(runs_dir, name)
    if path.is_symlink():  # moved, the link would sit in the trash unseen (trashed() skips links)
        raise HousekeepingError(f"{name} is a symlink to another folder: remove the link itself instead")
    if not path.is_dir():
        raise HousekeepingError(f"{name}: no such run in {runs_dir}")
    _refuse_if_busy(runs_dir, name, verb)
    target = dst_root / dst_name
    if target.exists():
        raise HousekeepingError(f"{name}: {target} exists already; restore or remove it first")
    lock = RunLock(path)
    try:
        held = lock.acquire()
    except OSError as exc:
        raise HousekeepingError(f"{name}: cannot take its lock ({exc.strerror}); nothing was moved") from None
    if not held:
        raise HousekeepingError(f"{name} is running (its trainer holds the run's lock): stop it first, "
                                f"then it can be {verb}")
    try:
        os.rename(path, target)  # same file system: one step, never half a run in each place
    finally:
        lock.release()
    _move_launch_files(runs_dir, name, dst_root, dst_name)
    return target


def trash(runs_dir: Path, name: str) -> str:
    """Move run `name` to the trash; returns its trash entry name. Refused while it runs or is queued."""
    check_name(name)
    folder = holding_folder(runs_dir, TRASH)
    entry = f"{name}@{time.strftime(STAMP, time.gmtime())}"
    n = 1
    while (folder / entry).exists():  # two deletes of one name within a second
        n += 1
        entry = f"{name}@{time.strftime(STAMP, time.gmtime())}-{n}"
    _move_run(runs_dir, name, folder, entry, "deleted")
    return entry


def _entry_name(entry: str) -> str:
    name = entry.rpartition("@")[0]
    check_name(name)
    return name


def trashed(runs_dir: Path) -> list[Trashed]:
    """The trash's entries, most recently deleted first (entries not made by trash() are skipped)."""
    folder = Path(runs_dir) / TRASH
    if folder.is_symlink() or not folder.is_dir():
        return []
    out = []
    for item in os.scandir(folder):
        if "@" not in item.name or not item.is_dir(follow_symlinks=False):
            continue
        try:
            name = _entry_name(item.name)
            when = calendar.timegm(time.strptime(item.name.rpartition("@")[2][:16], STAMP))
        except ValueError:
            continue
        path = Path(item.path)
        info = RunInfo(name, path, read_status(path / "status.json"), read_json(path / "config.json"))
        out.append(Trashed(item.name, name, when, info))
    return sorted(out, key=lambda e: e.entry.rpartition("@")[2], reverse=True)


def restore(runs_dir: Path, entry: str) -> str:
    """Move a trash entry back to the runs folder under its old name; refused when that name is taken."""
    runs_dir = Path(runs_dir)
    folder = holding_folder(runs_dir, TRASH)
    try:
        name = _entry_name(entry)
    except ValueError:
        raise HousekeepingError(f"{entry!r} is not an entry of the trash") from None
    src = folder / entry
    if "/" in entry or not src.is_dir() or src.is_symlink():
        raise HousekeepingError(f"{entry!r} is not an entry of the trash")
    _put_back(runs_dir, folder, entry, name)
    return name


def _put_back(runs_dir: Path, folder: Path, entry: str, name: str) -> None:
    target = run_path(runs_dir, name)
    if target.exists() or launch_records.record_path(runs_dir, name).exists():
        raise HousekeepingError(f"{name}: a run or launch of that name exists in the runs folder; "
                                "delete or rename it first")
    os.rename(folder / entry, target)
    _move_launch_files(folder, entry, runs_dir, name)


def empty_trash(runs_dir: Path) -> int:
    """Remove every entry of the trash for good; returns how many. rmtree does not follow symlinks."""
    folder = Path(runs_dir) / TRASH
    if folder.is_symlink() or not folder.is_dir():
        return 0
    entries = [e for e in os.scandir(folder) if e.name != launch_records.LAUNCH_DIR]
    for e in entries:
        if e.is_dir(follow_symlinks=False):
            shutil.rmtree(e.path)
        else:
            os.unlink(e.path)
    shutil.rmtree(folder / launch_records.LAUNCH_DIR, ignore_errors=True)
    return sum(1 for e in entries if "@" in e.name)


def held(runs_dir: Path, which: str) -> list[str]:
    """The entries of the archive (`which` "archive") or the trash ("trash"), by folder name; cheap
    enough for every refresh of the page (one directory listing, nothing opened)."""
    folder = Path(runs_dir) / (TRASH if which == "trash" else ARCHIVE)
    if folder.is_symlink() or not folder.is_dir():
        return []
    wanted = (lambda n: "@" in n) if which == "trash" else (lambda n: True)  # as trashed() and archived() list them
    return sorted(e.name for e in os.scandir(folder)
                  if not e.name.startswith(".") and wanted(e.name) and e.is_dir(follow_symlinks=False))


def archive(runs_dir: Path, name: str) -> None:
    """Move run `name` to `.archive/`; refused while it runs or is queued, or when an archived run has its name."""
    check_name(name)
    _move_run(runs_dir, name, holding_folder(runs_dir, ARCHIVE), name, "archived")


def archived(runs_dir: Path) -> list[RunInfo]:
    """The archived runs, read as the runs folder is (newest first)."""
    folder = Path(runs_dir) / ARCHIVE
    return [] if folder.is_symlink() or not folder.is_dir() else list_runs(folder)


def unarchive(runs_dir: Path, name: str) -> None:
    """Move an archived run back; refused when a run of its name exists again."""
    check_name(name)
    folder = holding_folder(runs_dir, ARCHIVE)
    src = folder / name
    if not src.is_dir() or src.is_symlink():
        raise HousekeepingError(f"{name}: no such archived run")
    _put_back(Path(runs_dir), folder, name, name)
