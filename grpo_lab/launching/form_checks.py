"""The checks a launch meets before anything starts, wherever its values come from.

The form's values, a queued entry read back from disk and a resumed run's config.json all go through
checked_config: the runs folder may be shared or unpacked from elsewhere, so nothing read back from it
is trusted more than the form. Each refusal is a LaunchError with one line a user can act on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grpo_lab.launching import allowed
from grpo_lab.rundir import sweep_manifest
from grpo_lab.rundir.layout import SOURCES_KEY, valid_run_name

MAX_PROCESSES = 64  # processes on this machine (--nproc-per-node); more machines: torchrun by hand


class LaunchError(ValueError):
    """Refused before anything started; the message says why."""


def check_processes(processes: Any) -> int:
    if isinstance(processes, bool) or not isinstance(processes, int) or not 1 <= processes <= MAX_PROCESSES:
        raise LaunchError(f"processes: must be a whole number in [1, {MAX_PROCESSES}], got {processes!r}")
    return processes


def checked_config(values: dict[str, Any], runs_dir: Path, processes: int = 1):
    """The checks every start goes through (form, queue, resume): data folders and reward modules
    (allowed.check_launch), the trainer's own validation and bounds (from_dict), registered reward
    names, the process count. Returns the trainer's Config; raises LaunchError with one line."""
    from grpo_lab.trainer.config import ConfigError, from_dict

    check_processes(processes)
    values = with_parent(values, runs_dir)  # a fork: its parent's options under the form's
    if (refused := allowed.check_launch(values, runs_dir)) is not None:
        raise LaunchError(refused)
    try:
        cfg = from_dict({**values, "runs_dir": str(runs_dir)}, world=processes)
        if cfg.fork_from:
            from grpo_lab.trainer import fork  # noqa: PLC0415 - as the trainer checks it

            fork.check(cfg)
    except ConfigError as exc:
        raise LaunchError(str(exc)) from None
    # and the paths as the trainer will use them: reward_params given as text, or merged with a task's defaults
    final = {option: getattr(cfg, option) for option in (*allowed.PATH_OPTIONS, "reward_params")}
    if (refused := allowed.check_launch(final, runs_dir)) is not None:
        raise LaunchError(refused)
    from grpo_lab import rewards  # light: reward code is imported only when a reward is built

    unknown = [n for n in cfg.rewards if ":" not in n and n not in rewards.available()]
    if unknown:
        raise LaunchError(f"rewards: unknown reward {unknown[0]!r}; registered rewards: {', '.join(rewards.available())}"
                          " (or name a function as 'package.module:function')")
    return cfg


def with_parent(values: dict[str, Any], runs_dir: Path) -> dict[str, Any]:
    """A fork's values (fork_from set) with its parent's options under them, as the trainer will take
    them (trainer/fork.py); a page forks only a run of its own runs folder, named. Other values as given."""
    if not values.get("fork_from"):
        return values
    from grpo_lab.trainer import fork  # noqa: PLC0415
    from grpo_lab.trainer.config import ConfigError  # noqa: PLC0415

    parent = values["fork_from"]
    if not valid_run_name(parent):
        raise LaunchError(f"fork_from: must name a run of this runs folder, got {parent!r}")
    try:
        inherited, _ = fork.parent_values({"fork_from": parent}, str(runs_dir))
    except ConfigError as exc:
        raise LaunchError(str(exc)) from None
    return {**inherited, **values}


def parse_trainer_args(argv: list[str]) -> dict[str, Any]:
    """The values an argument list gives the trainer (its own parser; the options given only).
    LaunchError (one line) when it refuses them, or when they ask for its help (argparse would
    print it and end the process: a scheduler, a page's script)."""
    from grpo_lab.trainer.config import ConfigError, build_parser

    if "-h" in argv or "--help" in argv:  # asked before parsing: argparse prints the help where the page runs
        raise LaunchError("argv: asks for the trainer's help, which starts no run")
    try:
        parsed = vars(build_parser().parse_args(argv))
    except ConfigError as exc:
        raise LaunchError(str(exc)) from None
    except SystemExit:  # any other action that ends the process
        raise LaunchError("argv: asks the trainer for something that starts no run") from None
    return {k: v for k, v in parsed.items() if v is not None}


def check_resume(runs_dir: Path, name: str, config: dict[str, Any], processes: int = 1) -> None:
    """The saved options of run `name` as a launch would check them; LaunchError naming the first
    refused option (prefixed 'resume refused')."""
    # a fork resumes from its own checkpoints: its parent may have gone (fork_from, fork_step left out)
    values = {k: v for k, v in config.items() if k not in (SOURCES_KEY, "runs_dir", "resume", "name", "fork_from",
                                                           "fork_step")}
    try:
        checked_config({**values, "name": name}, runs_dir, processes)
    except LaunchError as exc:
        raise LaunchError(f"resume refused: config.json of {name}: {exc}") from None
    check_variant(runs_dir, name, config)


def check_variant(runs_dir: Path, name: str, config: dict[str, Any]) -> None:
    """A run of a sweep resumes only as the variant it was planned as (rundir/sweep_manifest.py):
    LaunchError naming the options its config.json changed since. A sweep without a manifest (queued
    before manifests) cannot be checked, and passes."""
    sweep = config.get("sweep")
    entry, problem = sweep_manifest.planned(runs_dir, sweep, name)
    if problem:
        raise LaunchError(f"resume refused: {name}: its sweep's manifest cannot be read: {problem}")
    if entry is None:
        return
    keys = sweep_manifest.differing(entry["options"], {**config, "name": name})
    if keys:
        shown = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
        raise LaunchError(f"resume refused: config.json of {name} no longer matches its variant "
                          f"{str(entry.get('variant'))[:80]!r} of sweep {sweep!r}: {shown} differ "
                          f"({sweep_manifest.FOLDER}/{sweep}.json)")
