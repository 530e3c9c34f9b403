"""Launches that are no run yet: still starting, died before creating their run, queued, or refused.

Each is read from its launch record (`.launcher/<name>.json`), which anyone who can write the runs
folder may have planted: what a record plans is read through the trainer's parser and validation
(Planned), and whether its pid is alive through process_control.is_trainer_of.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_lab.launching import process_control
from grpo_lab.launching.commands import trainer_args_in
from grpo_lab.launching.form_checks import parse_trainer_args
from grpo_lab.launching.identity import option
from grpo_lab.launching.keys import KeyDirError, entry_signer
from grpo_lab.launching.launch_records import launch_log, read_record, record_names
from grpo_lab.rundir.layout import run_folders
from grpo_lab.rundir.reader import run_path


@dataclass(frozen=True)
class Planned:
    """What a launch record says its run will be: the run's options as the trainer would take them
    (its parser, then its validation: trainer.config), read from the record's queued `argv` or its
    started `command`. `checked` is False when they do not pass (a planted or damaged record):
    then only `sweep` and `variant` are known, as labels from the argument list."""

    sweep: str = ""
    variant: str = ""
    checked: bool = False
    algo: str = ""
    model: str = ""
    task: str = ""
    total_steps: int = 0  # its max_steps: what its status.json will say as total_steps


@dataclass
class Pending:
    """A launch whose run directory has no status.json yet."""

    name: str
    pid: int
    started_at: float
    alive: bool
    log: str
    queued: bool = False  # waiting for a free slot (GRPO_LAB_MAX_RUNS); started by launch_queue.start_queued
    refused: str = ""  # a queued entry that failed its checks, and why; never started
    elsewhere: bool = False  # queued by another dashboard (another key): it starts it, this one never does
    planned: Planned = Planned()  # what its record says the run will be


def pending(runs_dir: Path, listed: set[str] | frozenset[str] | None = None) -> list[Pending]:
    """Launches not among the `listed` runs: still starting, or died before creating their run.

    Pass the names of the runs a page already shows, so that a run moving from "launching" to
    listed is never in neither list; an empty set is a listing too (nothing shown). None: no
    listing, a launch whose run directory exists counts as a run.
    """
    process_control.reap()
    # no listing: the real folders (a link is left to run_path, which judges where it leads)
    runs = listed if listed is not None else {e.name for e in run_folders(runs_dir) if not e.is_symlink()}
    names = [n for n in record_names(runs_dir) if n not in runs]
    out = []
    for name in names:
        try:
            if listed is None and run_path(runs_dir, name).is_dir():
                continue  # no listing given: a launch whose directory exists is a run now
        except ValueError:
            pass  # its folder is a link leading out of the runs folder (or nowhere): listed, so that
            # start_queued refuses it with the reason (run_path's) instead of leaving it "queued"
        record = read_record(runs_dir, name)
        try:
            pid = int(record.get("pid") or 0)
            started = float(record.get("started_at") or record.get("queued_at") or 0)
        except (TypeError, ValueError):
            pid, started = 0, 0.0
        refused = str(record.get("refused") or "")
        waiting = bool(record.get("queued")) and not pid and not refused
        elsewhere = waiting and _signer(runs_dir, record) == "other"
        out.append(Pending(name, pid, started, process_control.is_trainer_of(pid, name, runs_dir),
                           f"refused: {refused}" if refused else launch_log(runs_dir, name, 30),
                           queued=waiting and not elsewhere, refused=refused, elsewhere=elsewhere,
                           planned=planned(record)))
    return out


def planned(record: dict[str, Any]) -> Planned:
    """What a launch record (`<runs>/.launcher/<name>.json`, read) says its run will be: its queued
    `argv`, else the trainer's arguments in its started `command`, through the trainer's parser and
    validation (the checks a queued entry meets again before it starts, bar the ones about files)."""
    argv = record.get("argv") if record.get("argv") is not None else trainer_args_in(record.get("command"))
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return Planned()
    labels = {"sweep": str(option(argv, "--sweep") or ""), "variant": str(option(argv, "--variant") or "")}
    return Planned(**labels, **_checked_plan(tuple(argv)))


@functools.lru_cache(maxsize=1024)
def _checked_plan(argv: tuple[str, ...]) -> dict[str, Any]:
    """Planned's checked fields for one argument list ({} when the trainer refuses it); cached, as
    the Runs page asks at every refresh of the same queue."""
    from grpo_lab.trainer.config import from_dict

    try:
        values = parse_trainer_args(list(argv))
        if "config" in values or "resume" in values:  # a file to read, a run to continue: no plan to show
            return {}
        cfg = from_dict({k: v for k, v in values.items() if k != "runs_dir"})
    except (ValueError, TypeError):  # LaunchError and ConfigError are ValueErrors
        return {}
    return {"checked": True, "algo": cfg.algo, "model": cfg.model, "task": cfg.task, "total_steps": cfg.max_steps}


def _signer(runs_dir: Path, record: dict[str, Any]) -> str:
    """keys.entry_signer; "this" while the key folder is unusable: start_queued then says why in one line."""
    try:
        return entry_signer(runs_dir, record)
    except (KeyDirError, ValueError, OSError):
        return "this"
