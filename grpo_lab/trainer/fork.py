"""Fork a run at a step: a new run starting from another run's checkpoint S, with some options changed.

`--fork-from runs/NAME --fork-step S [changed options]`. The parent's config.json gives every option
the child does not set (its name, sweep and variant excepted), and the result is validated as any
launch is. Then the child is a resume of a checkpoints folder it was handed: `link` puts the parent's
checkpoints/initial (the policy as RL started: the frozen reference, not the forked weights) and
step-S (weights, optimizer state, random state, PPO's value model) into the child's checkpoints/ as
hard links (copies across disks), and set-up restores them as --resume does (run.py prepare). The data
position is the step: a step's prompts are a function of (seed, step) (Task.batch), so the child's
step S+1 draws what the parent's did. With nothing changed the child's steps are the parent's, bit
for bit; its tables hold its own steps only, from S+1.

The parent is only read, never locked: a run that is training can be forked from any checkpoint it
lists (each is renamed into place whole). What the parent's checkpoints hold fixes the model's shapes
and the algorithm: FIXED options cannot change in a fork. The learning rate and weight decay can:
they are set on the restored optimizer (`retune`), which otherwise keeps the parent's.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Protocol

from grpo_lab.rundir import json_file
from grpo_lab.rundir.forks import INITIAL, checkpoint_dir, forkable_steps
from grpo_lab.rundir.layout import SOURCES_KEY, valid_run_name
from grpo_lab.trainer.config_error import ConfigError

# What the parent's checkpoint holds the shapes of (the policy, LoRA's adapters, PPO's value model)
FIXED = ("model", "algo", "lora_r", "lora_target_modules")
# The parent's options a child never takes: its identity and its place in a sweep
NOT_INHERITED = ("name", "runs_dir", "resume", "sweep", "variant", "fork_from", "fork_step", SOURCES_KEY)


def parent_dir(fork_from: str, runs_dir: str) -> Path:
    """The parent's folder: `fork_from` as a path (runs/NAME), else a run of that name in `runs_dir`."""
    given = Path(fork_from).expanduser()
    if valid_run_name(fork_from) and not (given / "config.json").is_file():
        return Path(runs_dir) / fork_from
    return given


def parent_config(folder: Path) -> dict[str, Any]:
    """The parent's config.json, read as input (the runs folder's bounded reader); ConfigError naming
    it when `folder` is not a run."""
    path = folder / "config.json"
    if not folder.is_dir() or not path.is_file():
        raise ConfigError(f"fork_from: {folder} is not a run (no config.json there)")
    saved, problem = json_file.read(path)
    if not isinstance(saved, dict):
        raise ConfigError(f"fork_from: {path} cannot be read ({problem or 'not a mapping of options'})")
    return saved


def parent_values(values: dict[str, Any], runs_dir: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The parent's options for the child (values the child gives win over them), and their source."""
    folder = parent_dir(str(values["fork_from"]), runs_dir)
    saved = parent_config(folder)
    inherited = {k: v for k, v in saved.items() if k not in NOT_INHERITED}
    return inherited, dict.fromkeys(inherited, f"parent run ({folder.name})")


def child_name(parent: str, step: int, runs_dir: str) -> str:
    """A child's default name: PARENT-fork-S, or PARENT-fork-S-2, ... when taken."""
    base = f"{parent[:80]}-fork-{step}"
    name, n = base, 1
    while (Path(runs_dir) / name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


class ForkOptions(Protocol):
    """The options `check` reads: a trainer.config.Config's (not imported: config.load_config calls this
    module, and two modules that import each other are an import cycle)."""

    name: str
    runs_dir: str
    fork_from: str
    fork_step: int
    model: str
    algo: str
    lora_r: int
    lora_target_modules: str

    @property
    def run_dir(self) -> Path: ...


def check(cfg: ForkOptions) -> Path:
    """The checkpoint folder a fork starts from; ConfigError (one line) when the parent is not a run,
    the step has no whole checkpoint (saying which steps have), or an option the parent's checkpoint
    fixes is changed. Reads only: nothing is written."""
    folder = parent_dir(cfg.fork_from, cfg.runs_dir)
    saved = parent_config(folder)
    if folder.resolve() == cfg.run_dir.resolve():
        raise ConfigError(f"name: a fork needs a name of its own, not its parent's ({cfg.name!r})")
    steps = forkable_steps(folder)
    if cfg.fork_step not in steps:
        where = (f"its forkable steps: {', '.join(map(str, steps))}" if steps else
                 "it has no whole checkpoint with an initial one beside it")
        raise ConfigError(f"fork_step: run {folder.name!r} has no checkpoint of step {cfg.fork_step} ({where})")
    for option in FIXED:
        if option in saved and saved[option] != getattr(cfg, option):
            raise ConfigError(f"{option}: a fork keeps its parent's {option} ({saved[option]!r}; its checkpoint "
                              f"holds that model), got {getattr(cfg, option)!r}; start a new run to change it")
    if cfg.algo == "ppo" and not (checkpoint_dir(folder, cfg.fork_step) / "value.safetensors").is_file():
        raise ConfigError(f"fork_step: run {folder.name!r}'s checkpoint of step {cfg.fork_step} has no value model")
    return checkpoint_dir(folder, cfg.fork_step)


def link(source: Path, checkpoints: Path) -> None:
    """Put checkpoint `source` and its run's initial one into `checkpoints` (the child's, new): hard
    links, or copies where the disk refuses links. Each goes in whole (built under a temporary name,
    renamed), so the child's resume sees all of it or none."""
    checkpoints.mkdir(parents=True, exist_ok=True)
    for folder in (source.parent / INITIAL, source):
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=checkpoints))
        try:
            for file in sorted(folder.iterdir()):
                try:
                    os.link(file, tmp / file.name)
                except OSError:  # another disk, or a file system without hard links
                    shutil.copy2(file, tmp / file.name)
        except FileNotFoundError:  # the parent's retention removed it meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
            raise RuntimeError(f"fork: {folder} was removed while it was being read (the parent's checkpoint "
                               "retention); fork from a step it keeps") from None
        tmp.rename(checkpoints / folder.name)


def retune(optimizer, *, lr: float, weight_decay: float) -> None:
    """The restored optimizer with the child's learning rate and weight decay (its moments stay)."""
    for group in optimizer.param_groups:
        group["lr"], group["weight_decay"] = lr, weight_decay
