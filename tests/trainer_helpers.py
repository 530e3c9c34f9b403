"""Run the real trainer as a subprocess on a tiny budget, and read its tables back."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

from grpo_lab.rundir.layout import RunPaths, visible_parts

ROOT = Path(__file__).resolve().parent.parent
# A run of a few seconds: small batch, short warm start.
SMALL = ["--prompts-per-step", "4", "--group-size", "4", "--sft-steps", "20", "--flush-seconds", "0"]


def trainer_cmd(runs_dir: Path, name: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "grpo_lab.trainer", "--runs-dir", str(runs_dir), "--name", name, *args]


def run_trainer(runs_dir: Path, name: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(trainer_cmd(runs_dir, name, *args), cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def start_trainer(runs_dir: Path, name: str, *args: str) -> subprocess.Popen:
    """A trainer in the background (stderr kept for the failure message); finish it with wait_trainers."""
    return subprocess.Popen(trainer_cmd(runs_dir, name, *args), cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_trainers(procs: list[subprocess.Popen], timeout: float = 300) -> None:
    """Each trainer must succeed. communicate() drains stderr (progress bars fill it), so a
    trainer never blocks on a full pipe the way wait() would let it."""
    for proc in procs:
        _, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err[-2000:]


def read_table(run_dir: Path, table: str) -> pd.DataFrame:
    parts = visible_parts(RunPaths(run_dir).table(table))
    return pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True) if parts else pd.DataFrame()


DOC = ROOT / "docs" / "run-directory.md"
# The doc's tables of per-step metrics: (heading that opens the table, algorithms that write it).
METRIC_TABLES = (("## tables/scalars", ("grpo", "ppo")), ("**Scalars GRPO adds.**", ("grpo",)),
                 ("**Scalars PPO adds.**", ("ppo",)))


def documented_metrics(algo: str, rewards: list[str]) -> set[str]:
    """The metric names docs/run-directory.md lists for `algo`, with `<fn>` expanded to `rewards`.

    A cell such as "`reward/mean`, `/std`" lists reward/mean and reward/std.
    """
    names: set[str] = set()
    lines = DOC.read_text().splitlines()
    for heading, algos in METRIC_TABLES:
        if algo not in algos:
            continue
        start = next(i for i, line in enumerate(lines) if line.startswith(heading))
        body = lines[start + 1:]
        first = next(i for i, line in enumerate(body) if line.startswith("| metric"))
        for line in body[first + 2:]:
            if not line.startswith("|"):
                break
            cell = line.split("|")[1]
            base = ""
            for name in re.findall(r"`([^`]+)`", cell):
                if name.startswith("/"):
                    name = base + name
                base = name.rsplit("/", 1)[0]
                names.update(name.replace("<fn>", fn) for fn in rewards) if "<fn>" in name else names.add(name)
    return names
