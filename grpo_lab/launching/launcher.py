"""Launch a run from the dashboard: check the form's values, then start the trainer or queue it.

The rooms it calls on, each importable on its own:
- form_checks.py: the checks every start goes through (form, queue, resume), with the trainer's own
  `grpo_lab.trainer.config.from_dict`, before anything starts;
- commands.py: the trainer's command line (an argument list, never a shell; torchrun for several processes);
- process_control.py: start, stop, resume and dismiss trainer processes;
- launch_records.py: `<runs_dir>/.launcher/<name>.json` and `.log`, what each launch leaves;
- launch_queue.py: the signed queue of launches waiting for a free slot; pending_launches.py: the
  launches that are no run yet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grpo_lab.launching import launch_queue, process_control
from grpo_lab.launching.commands import trainer_argv
from grpo_lab.launching.form_checks import LaunchError, checked_config
from grpo_lab.launching.launch_records import read_record, record_path
from grpo_lab.rundir.reader import run_path


def free_name(runs_dir: Path, base: str = "demo") -> str:
    """`base`, or base-2, base-3, ... : the first name no run or launch uses."""
    name, n = base, 1
    while (runs_dir / name).exists() or record_path(runs_dir, name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def validate(values: dict[str, Any], runs_dir: Path, processes: int = 1) -> list[str]:
    """The trainer's validation of the form values, plus "is the name free" and what several
    processes need (the trainer's own refusals, before anything starts); returns argv tail."""
    values = {k: v for k, v in values.items() if v is not None and v != ""}
    cfg = checked_config(values, runs_dir, processes)
    path = run_path(runs_dir, cfg.name)
    queued = read_record(runs_dir, cfg.name).get("queued")
    if path.exists() or queued or process_control.alive_launch(runs_dir, cfg.name):
        raise LaunchError(f"name: a run named {cfg.name!r} already exists; choose another name")
    values["name"] = cfg.name
    return trainer_argv(values)


def launch(values: dict[str, Any], runs_dir: Path, processes: int = 1) -> tuple[str, int]:
    """Validate, then start a new run in the background (on `processes` processes); returns
    (name, pid). With max_runs() runs already training it is queued instead (pid 0), on disk,
    and launch_queue.start_queued starts it."""
    argv = validate(values, runs_dir, processes)
    name = argv[argv.index("--name") + 1]
    if launch_queue.training(runs_dir) >= launch_queue.max_runs():
        launch_queue.enqueue(runs_dir, name, argv, processes)
        return name, 0
    return name, process_control.start_process(runs_dir, name, argv, processes)
