"""Run the real trainer as a subprocess on a tiny budget, and read its tables back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from rundir.layout import RunPaths, visible_parts

ROOT = Path(__file__).resolve().parent.parent
# A run of a few seconds: small batch, short warm start.
SMALL = ["--prompts-per-step", "4", "--group-size", "4", "--sft-steps", "5", "--flush-seconds", "0"]


def trainer_cmd(runs_dir: Path, name: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "trainer", "--runs-dir", str(runs_dir), "--name", name, *args]


def run_trainer(runs_dir: Path, name: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(trainer_cmd(runs_dir, name, *args), cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def read_table(run_dir: Path, table: str) -> pd.DataFrame:
    parts = visible_parts(RunPaths(run_dir).table(table))
    return pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True) if parts else pd.DataFrame()
