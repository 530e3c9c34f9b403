"""What the dashboard keeps of each launch: `<runs_dir>/.launcher/<name>.json` and `<name>.log`.

A start leaves its record (pid, command, time) and the trainer's stdout and stderr, so a run that dies
before it creates its directory (a model that cannot load, say) still shows up, with its output; a queued
launch is a record too (launch_queue.py). The folder starts with '.', so it can never be a run name, and
everything read back from it is input: a record is checked again before anything acts on it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from grpo_lab.launching.form_checks import LaunchError
from grpo_lab.rundir.layout import read_json, valid_run_name
from grpo_lab.rundir.reader import check_name, tail_checked

LAUNCH_DIR = ".launcher"  # starts with '.', so it can never be a run name


def record_path(runs_dir: Path, name: str, suffix: str = ".json") -> Path:
    """`<runs_dir>/.launcher/<name>.json`, the launch record of `name` (`.log`: its trainer's output)."""
    return Path(runs_dir) / LAUNCH_DIR / f"{name}{suffix}"


def read_record(runs_dir: Path, name: str) -> dict[str, Any]:
    """The launch record of `name` as read ({} when missing or unreadable): input, never trusted."""
    return read_json(record_path(runs_dir, name)) or {}


def launch_folder(runs_dir: Path) -> Path:
    """<runs>/.launcher, created; refused when it is not a real folder (a symlink would send the
    records and logs this dashboard writes somewhere else)."""
    folder = Path(runs_dir) / LAUNCH_DIR
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise LaunchError(f"{folder} is not a folder (a symlink?); remove it to launch from the dashboard")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def lock_file(runs_dir: Path, name: str):
    """`<runs>/.launcher/<name>`, opened for flock (never through a planted symlink)."""
    fd = os.open(launch_folder(Path(runs_dir)) / name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    return open(fd, "r+")


def record_names(runs_dir: Path) -> list[str]:
    """The runs with a launch record, sorted: one listing of the folder, names compared as text, and only
    names a run can have (write_json_atomic's .tmp-*.json mid-write, or a planted file, are no launch)."""
    try:
        names = sorted(e.name[:-5] for e in os.scandir(Path(runs_dir) / LAUNCH_DIR) if e.name.endswith(".json"))
    except OSError:
        return []
    return [n for n in names if valid_run_name(n)]


def launch_log(runs_dir: Path, name: str, lines: int = 40) -> str:
    """The trainer's own stdout/stderr for a run started here ('' otherwise); for a refused queue
    entry, why; for a log that is not a regular file in .launcher/, one line saying so."""
    check_name(name)
    refused = read_record(runs_dir, name).get("refused")
    if refused:
        return f"refused: {refused}"
    text, problem = tail_checked(record_path(runs_dir, name, ".log"), lines)
    return problem or text
