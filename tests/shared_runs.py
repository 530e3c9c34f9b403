"""Finished runs that many test files only read, trained once per pytest session.

A trainer start costs ~12 s of CPU before its first step on the 2-core test machine, so the files
that only read a plain GRPO, a one-pass GRPO or a PPO run share these instead of each training its
own. Import the fixtures into a test file (`from shared_runs import grpo_run`); never write into the
returned folders: a test that changes a run (a damaged copy, an older schema, a resume) works on
`copy_run(...)`.

Why a cache beside the fixtures: a session fixture imported into several test modules is a separate
fixture in each, and pytest would train it once per module; the dict keeps one run per session.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import pytest

from grpo_lab.rundir.layout import write_json_atomic
from trainer_helpers import SMALL, run_trainer

# The shared GRPO run: 6 steps, a checkpoint every 3 (tests/test_train_run.py reads both).
GRPO_FLAGS = [*SMALL, "--max-steps", "6", "--checkpoint-every", "3"]
# One pass, no reference model: the ratio is exactly 1 and no reference is loaded (two facts, one run).
ONE_PASS_FLAGS = [*SMALL, "--max-steps", "2", "--passes", "1", "--beta", "0"]
# The shared PPO run: same task, model and seed as the GRPO run, so their groups share prompts; GAE,
# minibatch and KL options off their defaults so that tests/test_ppo_run.py checks them being used.
PPO_BETA, PPO_GAMMA, PPO_LAM = 0.1, 0.9, 0.8
PPO_FLAGS = [*SMALL, "--algo", "ppo", "--max-steps", "4", "--beta", str(PPO_BETA), "--gamma", str(PPO_GAMMA),
             "--lam", str(PPO_LAM), "--minibatches", "2", "--passes", "2"]

_made: dict[tuple[str, str], Path | str] = {}  # the run's folder, or why its trainer failed


def _once(tmp_path_factory, name: str, train: Callable[[Path], object]) -> Path:
    key = (str(tmp_path_factory.getbasetemp()), name)  # a new session (basetemp) trains again
    if key not in _made:
        root = tmp_path_factory.mktemp(f"shared-{name}")
        result = train(root)
        # a failed trainer fails every test that reads its run, without training again for each module
        _made[key] = root / name if result.returncode == 0 else f"shared run {name!r}: {result.stderr[-3000:]}"
    made = _made[key]
    assert isinstance(made, Path), made
    return made


@pytest.fixture(scope="session")
def grpo_run(tmp_path_factory) -> Path:
    """A finished GRPO run of the built-in demo (GRPO_FLAGS), named "grpo". Read only."""
    return _once(tmp_path_factory, "grpo", lambda root: run_trainer(root, "grpo", *GRPO_FLAGS))


@pytest.fixture(scope="session")
def one_pass_run(tmp_path_factory) -> Path:
    """A finished GRPO run with --passes 1 --beta 0 (ONE_PASS_FLAGS), named "one-pass". Read only."""
    return _once(tmp_path_factory, "one-pass", lambda root: run_trainer(root, "one-pass", *ONE_PASS_FLAGS))


@pytest.fixture(scope="session")
def ppo_run(tmp_path_factory) -> Path:
    """A finished PPO run of the built-in demo (PPO_FLAGS), named "ppo". Read only."""
    return _once(tmp_path_factory, "ppo", lambda root: run_trainer(root, "ppo", *PPO_FLAGS))


def copy_run(run: Path, root: Path, name: str, checkpoints: bool = True) -> Path:
    """A copy of `run` as root/name, its config and status saying `name` and `root` (as if trained there)."""
    dest = Path(root) / name
    shutil.copytree(run, dest, ignore=None if checkpoints else shutil.ignore_patterns("checkpoints"))
    for file in ("config.json", "status.json"):
        data = json.loads((dest / file).read_text())
        moved = {"name": name, **({"runs_dir": str(root)} if "runs_dir" in data else {})}
        write_json_atomic(dest / file, {**data, **moved})
    return dest
