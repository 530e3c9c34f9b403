"""What the trainer can refuse before transformers loads (4-5 s of a start on a 2-core machine): a run
folder that exists or is missing, a run another trainer holds, a planted pickle in the checkpoint to
resume, a reward name nobody registered, a model folder that is not there, a bad data row. The checks
that need the libraries (a reward's dry run, a model's hub id offline) still come in set-up, which repeats
the run-folder checks under the run's lock (grpo_lab/trainer/run.py: prepare)."""

from __future__ import annotations

import os
from pathlib import Path

from grpo_lab.rundir.layout import RunLock, RunPaths
from grpo_lab.trainer import environment_setup
from grpo_lab.trainer import smollm
from grpo_lab.trainer.config import BUILTIN_MODELS, Config, ConfigError, launched_world_size
from grpo_lab.trainer.data import build_tasks
from grpo_lab.trainer.hub import looks_local
from grpo_lab.trainer.tasks import Task


def check_run_dir(cfg: Config) -> RunPaths:
    paths = RunPaths(cfg.run_dir)
    runs_dir = cfg.run_dir.parent
    if cfg.resume:
        if not paths.config.is_file():
            raise ConfigError(f"resume: no run named {cfg.name!r} in {runs_dir}/ to resume")
    elif paths.root.exists():
        raise ConfigError(f"name: a run named {cfg.name!r} already exists in {runs_dir}/; "
                          "pass --resume to continue it, or choose another name")
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"runs_dir: cannot create {runs_dir} ({exc.strerror})") from None
    if not os.access(runs_dir, os.W_OK | os.X_OK):
        raise ConfigError(f"runs_dir: {runs_dir} is not writable")
    return paths


def claim(cfg: Config, paths: RunPaths) -> RunLock:
    """Make this process the run's only writer: its lock is held until the process ends, so a run
    that another trainer is writing cannot be resumed."""
    lock = RunLock(paths.root)
    if not lock.acquire():
        raise ConfigError(f"{'resume' if cfg.resume else 'name'}: run {cfg.name!r} is being trained by another "
                          f"process (pid {lock.holder() or '?'}); stop it first")
    return lock


def check_model_folder(model: str) -> None:
    if model in BUILTIN_MODELS or model == smollm.ALIAS:
        return
    if looks_local(model) and not Path(model).expanduser().is_dir():
        raise ConfigError(f"model: no model directory at {model!r}; use 'tiny', 'smollm2' or a Hugging Face model "
                          "directory or id")


def preflight(cfg: Config) -> tuple[Task, Task | None]:
    """Run in the trainer's own process (relative paths read from its working folder), after validate;
    returns the tasks (training, held-out), every row checked, for set-up to use.
    Under a launcher every rank runs it and refuses alike (rank 0 says why); the lock and the
    checkpoint, which ranks would race for, are left to rank 0 in set-up."""
    from grpo_lab.rewards import registry

    paths = check_run_dir(cfg)
    if cfg.resume and launched_world_size() == 1:
        claim(cfg, paths).release()  # set-up takes it for good; a trainer holding it now refuses us now
        from grpo_lab.trainer import checkpoint  # torch, not transformers: a planted pickle never reaches set-up

        checkpoint.check(checkpoint.latest(paths.checkpoints))
    if cfg.fork_from and not cfg.resume:  # the parent's checkpoint, as a resume's own is checked
        from grpo_lab.trainer import checkpoint, fork  # noqa: PLC0415 - torch, not transformers

        checkpoint.check(fork.check(cfg))
    own = environment_setup.source_name(cfg.environment)  # the environment's get_reward, which config.json lists
    for name in cfg.rewards:
        if name == own:
            continue
        try:
            registry.check_name(name)
        except ValueError as exc:
            raise ConfigError(f"rewards: {exc}") from None
    check_model_folder(cfg.model)
    return build_tasks(cfg)  # bad data: one line naming the file, row and column
