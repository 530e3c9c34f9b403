"""Finished runs that many test files only read, trained once per pytest session.

A trainer start costs ~12 s of CPU before its first step on the 2-core test machine, so the files
that only read a plain GRPO, a one-pass GRPO or a PPO run share these instead of each training its
own. Import the fixtures into a test file (`from shared_runs import grpo_run`); never write into the
returned folders: a test that changes a run (a damaged copy, an older schema, a resume) works on
`copy_run(...)`.

Why a folder and a lock beside the fixtures: a session fixture imported into several test modules is a
separate fixture in each, and pytest would train it once per module; under pytest-xdist each worker
process has its own session too. The first to ask trains into the session's shared folder while holding
the run's lock; every other module and worker waits on the lock and reads the same run.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Callable

import pytest
from filelock import FileLock

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


def session_root(tmp_path_factory) -> Path:
    """The folder every process of this pytest session sees: each xdist worker's basetemp is
    .../pytest-N/popen-gwK, their parent the session's; without xdist, the basetemp itself."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _once(tmp_path_factory, name: str, train: Callable[[Path], object]) -> Path:
    root = session_root(tmp_path_factory) / f"shared-{name}"
    # "" once trained, or why its trainer failed: every reader fails with that, and none trains again
    outcome = root / "outcome.txt"
    with FileLock(f"{root}.lock"):
        if not outcome.exists():
            root.mkdir(exist_ok=True)
            try:
                result = train(root)
                outcome.write_text("" if result.returncode == 0 else f"shared run {name!r}: {result.stderr[-3000:]}")
            except Exception as exc:  # a timeout: the readers after this one fail at once too
                outcome.write_text(f"shared run {name!r}: {exc!r}")
                raise
    why = outcome.read_text()
    assert not why, why
    return root / name


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
