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
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
from filelock import FileLock

from grpo_lab.rundir.layout import write_json_atomic
from trainer_helpers import ROOT, SMALL, run_trainer, torchrun

# The shared GRPO run: 6 steps, a checkpoint every 3 (tests/trainer/test_train_run.py reads both).
GRPO_FLAGS = [*SMALL, "--max-steps", "6", "--checkpoint-every", "3"]
# One pass, no reference model: the ratio is exactly 1 and no reference is loaded (two facts, one run).
ONE_PASS_FLAGS = [*SMALL, "--max-steps", "2", "--passes", "1", "--beta", "0"]
# The shared PPO run: same task, model and seed as the GRPO run, so their groups share prompts; GAE,
# minibatch and KL options off their defaults so that tests/trainer/test_ppo_run.py checks them being used.
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


# The two-process runs (tests/trainer/test_distributed.py, tests/trainer/test_rank_timings.py): 2 steps on 2 ranks under
# torchrun, and the same seed and global batch on one process.
RANKS_FLAGS = ["--prompts-per-step", "4", "--group-size", "4", "--sft-steps", "5", "--flush-seconds", "0",
               "--max-steps", "2", "--seed", "5"]
SLOW_S = 1.0  # rank 1's extra seconds per sampling call
# python -m grpo_lab.trainer, except that rank 1's sampling sleeps first: rank 0 can see the straggler
# only through rank 1's own figures (tests/trainer/test_rank_timings.py)
STRAGGLER = f"""
import os, sys, time
from grpo_lab.trainer import sampling
from grpo_lab.trainer.__main__ import main

if os.environ["RANK"] == "1":
    sample = sampling.sample
    def slow_sample(*args, **kwargs):
        time.sleep({SLOW_S})
        return sample(*args, **kwargs)
    sampling.sample = slow_sample
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="session")
def two_process_runs(tmp_path_factory) -> Path:
    """A runs folder with "two" (RANKS_FLAGS on 2 processes under torchrun, rank 1 a straggler in sampling)
    and "one" (the same on one process). Read only. Its readers take turns on the torchrun worker
    (tests/conftest.py finds `torchrun(` in this source)."""
    def train(root: Path) -> subprocess.CompletedProcess:
        runs = root / "ranks"
        script = root / "straggler.py"
        script.write_text(STRAGGLER)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        two = subprocess.run(torchrun(str(script), "--runs-dir", str(runs), "--name", "two", *RANKS_FLAGS),
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        return two if two.returncode else run_trainer(runs, "one", *RANKS_FLAGS, timeout=600)

    return _once(tmp_path_factory, "ranks", train)


def copy_run(run: Path, root: Path, name: str, checkpoints: bool = True) -> Path:
    """A copy of `run` as root/name, its config and status saying `name` and `root` (as if trained there)."""
    dest = Path(root) / name
    shutil.copytree(run, dest, ignore=None if checkpoints else shutil.ignore_patterns("checkpoints"))
    for file in ("config.json", "status.json"):
        data = json.loads((dest / file).read_text())
        moved = {"name": name, **({"runs_dir": str(root)} if "runs_dir" in data else {})}
        write_json_atomic(dest / file, {**data, **moved})
    return dest
