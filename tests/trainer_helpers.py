"""Run the real trainer as a subprocess on a tiny budget, and read its tables back."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pandas as pd

import trainer_fork

from grpo_lab.rundir import metrics
from grpo_lab.rundir.reader import TableReader
from grpo_lab.rundir.status import read_status

ROOT = Path(__file__).resolve().parent.parent
# A run of a few seconds: small batch, short warm start.
SMALL = ["--prompts-per-step", "4", "--group-size", "4", "--sft-steps", "20", "--flush-seconds", "0"]


def trainer_options(runs_dir: Path, name: str, *args: str) -> list[str]:
    return ["--runs-dir", str(runs_dir), "--name", name, *args]


def trainer_cmd(runs_dir: Path, name: str, *args: str) -> list[str]:
    return [*trainer_fork.COMMAND, *trainer_options(runs_dir, name, *args)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(*args: str, nproc: int = 2, launcher: tuple[str, ...] = ()) -> list[str]:
    """`torchrun --nproc-per-node N` beside this Python on a free port (or with `launcher`'s options)."""
    exe = Path(sys.executable).with_name("torchrun")
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "torch.distributed.run"]
    return [*base, "--nproc-per-node", str(nproc), *(launcher or ("--master-port", str(free_port()))), *args]


def run_trainer(runs_dir: Path, name: str, *args: str, timeout: float = 300, user_modules: Path | None = None,
                env: dict[str, str] | None = None, fresh: bool = False) -> subprocess.CompletedProcess:
    """The trainer to its end (see trainer_process). `user_modules`: a folder the run imports rewards,
    tools or environments from (`module:function`); `env`: variables added to this process's."""
    path = str(ROOT) + (f"{os.pathsep}{user_modules}" if user_modules else "")
    proc = trainer_process(runs_dir, name, args, {**os.environ, **(env or {}), "PYTHONPATH": path}, fresh,
                           stdout=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def start_trainer(runs_dir: Path, name: str, *args: str) -> trainer_fork.ForkedTrainer | subprocess.Popen:
    """A trainer in the background (see trainer_process); finish it with wait_trainers (its stderr is
    kept for the failure message)."""
    return trainer_process(runs_dir, name, args, {**os.environ, "PYTHONPATH": str(ROOT)})


def trainer_process(runs_dir: Path, name: str, args: tuple[str, ...], env: dict[str, str], fresh: bool = False,
                    stdout: int = subprocess.DEVNULL) -> trainer_fork.ForkedTrainer | subprocess.Popen:
    """The trainer, forked from this worker's trainer server (tests/trainer_fork.py) unless `fresh` asks
    for a new `python -m grpo_lab.trainer` or `env` sets what the libraries read on import."""
    options = trainer_options(runs_dir, name, *args)
    if fresh or not trainer_fork.forkable(env):
        return subprocess.Popen([*trainer_fork.COMMAND, *options], cwd=ROOT, env=env, stdout=stdout,
                                stderr=subprocess.PIPE, text=True)
    return trainer_fork.fork_trainer(options, env)


def wait_trainers(procs: list, timeout: float = 300) -> None:
    """Each trainer must succeed. communicate() drains stderr (progress bars fill it), so a
    trainer never blocks on a full pipe the way wait() would let it."""
    for proc in procs:
        _, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err[-2000:]


def wait_until(condition: Callable[[], Any], timeout: float = 120.0, what: str = "the condition",
               alive: subprocess.Popen | None = None, every: float = 0.05) -> Any:
    """The first truthy value of `condition()`, polled; fails naming `what` after `timeout` seconds,
    or at once when the process `alive` (the one expected to bring the condition about) has exited."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if alive is not None and alive.poll() is not None:
            raise AssertionError(f"process {alive.args[:3]}... exited ({alive.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def wait_for_step(run_dir: Path, step: int, proc: subprocess.Popen | None = None, timeout: float = 120) -> dict:
    """The run's status once it reports `step` (or later)."""
    def reached() -> dict | None:
        status = read_status(Path(run_dir) / "status.json") or {}
        return status if (status.get("step") or 0) >= step else None
    return wait_until(reached, timeout, f"step {step} of {Path(run_dir).name}", alive=proc)


def wait_for_state(run_dir: Path, state: str, proc: subprocess.Popen | None = None, timeout: float = 120) -> dict:
    def there() -> dict | None:
        status = read_status(Path(run_dir) / "status.json") or {}
        return status if status.get("state") == state else None
    return wait_until(there, timeout, f"{Path(run_dir).name} {state}", alive=proc)


def read_table(run_dir: Path, table: str) -> pd.DataFrame:
    """A table's visible rows in the order they were written, through rundir's reader."""
    read = TableReader(Path(run_dir), table).read()
    return read.table.to_pandas() if read.table is not None else pd.DataFrame()


def always_filled(names: set[str]) -> list[str]:
    """The metric names a run writes a number for on every step, sorted: all but the reward-hacking lens's
    honesty/*, which are NaN where a figure does not apply (one reward, no spread, no reference answer, a
    trend before its window; docs/run-directory.md)."""
    return sorted(n for n in names if not n.startswith("honesty/"))


def registered_metrics(algo: str, rewards: list[str], processes: int = 1) -> set[str]:
    """The metric columns grpo_lab.rundir.metrics says a run of `algo` writes (no eval/*)."""
    return metrics.names(algo, rewards, processes)
