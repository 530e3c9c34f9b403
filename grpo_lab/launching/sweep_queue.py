"""A planned sweep (grpo_lab/launching/sweep_grid.py) through the launch queue: every run checked as the launch
form's values are, the sweep's manifest written (rundir/sweep_manifest.py), then each run queued or
started (launcher.py). The launch form's Seeds / Sweep over and `grpo-lab-sweep` both call this.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from grpo_lab.launching import form_checks, launch_queue, launch_records, launcher, process_control
from grpo_lab.rundir import sweep_manifest
from grpo_lab.rundir.layout import SOURCES_KEY
from grpo_lab.rundir.reader import list_runs, read_run
from grpo_lab.launching.sweep_grid import PER_RUN, PlannedRun, SweepError, parse_grid, plan


def _given(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None and v != ""}


def check_all(runs: list[PlannedRun], runs_dir: Path, processes: int = 1) -> dict[str, dict[str, Any]]:
    """Every run through the launch checks (the trainer's own messages) before anything is queued;
    returns each run's manifest entry: its variant, seed and effective options."""
    entries = {}
    for run in runs:
        try:
            cfg = form_checks.checked_config(_given(run.values), runs_dir, processes)
        except (form_checks.LaunchError, ValueError) as exc:
            raise SweepError(f"{run.variant}: {exc}" if run.variant != "base" else str(exc)) from None
        options = {k: v for k, v in cfg.run_record().items() if k not in (SOURCES_KEY, "runs_dir")}
        entries[run.name] = {"variant": run.variant, "seed": run.seed, "options": options}
    return entries


def existing(runs_dir: Path, name: str, runs: list[PlannedRun]) -> list[str]:
    """Runs or launches already in runs_dir that belong to sweep `name` (or take one of its names)."""
    taken = {r.name for r in list_runs(runs_dir) if (r.config or {}).get("sweep") == name}
    for run in runs:
        if (runs_dir / run.name).exists() or launch_records.record_path(runs_dir, run.name).exists():
            taken.add(run.name)
    return sorted(taken)


def run_state(runs_dir: Path, name: str) -> tuple[str, int, int]:
    """(state, step, total steps) of one run of the sweep: its run directory's state, else its
    launch record's: queued, refused, launching (the trainer is alive), failed (it died before
    writing status.json), or missing (never launched)."""
    from grpo_lab.rundir.json_file import read_json

    info = read_run(runs_dir, name)
    record = read_json(launch_records.record_path(runs_dir, name))
    if info.status is not None:
        # a resumed run reads 'stopped' until its new trainer says otherwise: alive means not ended
        resuming = info.state in ("stopped", "failed") and process_control.is_trainer_of((record or {}).get("pid"), name, runs_dir)
        return ("launching" if resuming else info.state), info.step, info.total_steps
    if record is None:
        return "missing", 0, 0
    if record.get("refused"):
        return "refused", 0, 0
    if record.get("queued") and not record.get("pid"):
        return "queued", 0, 0
    return ("launching" if process_control.is_trainer_of(record.get("pid"), name, runs_dir) else "failed"), 0, 0


def start(runs: list[PlannedRun], runs_dir: Path, resume: bool, processes: int = 1) -> list[str]:
    """Queue or start every run not yet there; with `resume`, restart the unfinished ones when a
    slot is free (process_control.resume starts at once, so it is held back here as the queue would). A run
    whose config.json no longer matches its variant is refused here, in one line, and not held."""
    waiting = []
    for run in runs:
        state = run_state(runs_dir, run.name)[0] if resume else "missing"
        if state in ("stopped", "failed") and (runs_dir / run.name / "config.json").is_file():
            try:
                form_checks.check_variant(runs_dir, run.name, read_run(runs_dir, run.name).config or {})
            except form_checks.LaunchError as exc:
                print(f"error: {exc}", file=sys.stderr)
                continue
            waiting.append(run.name)  # resumed from its checkpoint by resume_waiting
            continue
        if state in ("refused", "failed"):  # a launch that never made its run: start it afresh
            process_control.dismiss(runs_dir, run.name)
            state = "missing"
        if state == "missing":
            try:  # checked already; what can still refuse is the folder changing under us (a name taken since)
                launcher.launch(_given(run.values), runs_dir, processes)
            except (form_checks.LaunchError, ValueError) as exc:
                print(f"error: {run.name}: {exc}", file=sys.stderr)
    return waiting


def submit(name: str, base: dict[str, Any], grid_items: list[str], seeds: list[int], runs_dir: Path,
           processes: int = 1) -> list[PlannedRun]:
    """A new sweep planned, checked and queued (the launch form's Seeds / Sweep over); SweepError
    with one line, before anything is queued, when it is refused."""
    base = {k: v for k, v in base.items() if k not in PER_RUN}
    runs = plan(name, base, parse_grid(grid_items), seeds)
    entries = check_all(runs, runs_dir, processes)
    if taken := existing(runs_dir, name, runs):
        raise SweepError(f"name: a sweep or run named {taken[0]!r} exists; choose another name")
    Path(runs_dir).mkdir(parents=True, exist_ok=True)
    sweep_manifest.write(runs_dir, name, entries, new=True)
    start(runs, Path(runs_dir), resume=False, processes=processes)
    return runs


def resume_waiting(runs_dir: Path, waiting: list[str]) -> list[str]:
    """Resume held-back runs while slots are free; returns those still waiting."""
    while waiting and launch_queue.training(runs_dir) < launch_queue.max_runs():
        name = waiting.pop(0)
        try:
            process_control.resume(runs_dir, name)
        except (form_checks.LaunchError, ValueError) as exc:  # it stays unfinished, and --wait names it
            print(f"error: {name}: {exc}", file=sys.stderr)
    return waiting
