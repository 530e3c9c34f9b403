"""Benchmark: the default demo run learns. Goal: reward moving average from <= 0.35 to >= 0.8 in <= 3 min.

Runs `python -m grpo_lab.trainer` with its defaults (the built-in demo) in a temporary runs folder and
prints the reward curve summary. Usage: .venv/bin/python bench/bench_demo_learning.py [--seed N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grpo_lab.rundir.layout import RunPaths, visible_parts  # noqa: E402

WINDOW = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as runs:
        start = time.time()
        subprocess.run([sys.executable, "-m", "grpo_lab.trainer", "--runs-dir", runs, "--name", "demo", "--seed",
                        str(args.seed)], cwd=ROOT, check=True, stderr=subprocess.DEVNULL)
        total = time.time() - start
        parts = visible_parts(RunPaths(Path(runs) / "demo").table("scalars"))
        df = pd.concat([pd.read_parquet(p) for p in parts]).sort_values("step").reset_index(drop=True)
    ma = df["reward/mean"].rolling(WINDOW, min_periods=WINDOW).mean()
    since_launch = df["time"] - start
    crossed = ma[ma >= 0.8]
    print(f"demo run: {len(df)} steps, process wall {total:.1f} s (incl. start-up and warm start)")
    print(f"reward MA{WINDOW} first window (steps 1-{WINDOW}): {ma.iloc[WINDOW - 1]:.3f}   goal <= 0.35")
    if len(crossed):
        i = crossed.index[0]
        print(f"reward MA{WINDOW} >= 0.8 first at step {int(df.step[i])}, {since_launch[i]:.1f} s after launch"
              f"   goal <= 180 s")
    else:
        print(f"reward MA{WINDOW} never reached 0.8 (max {ma.max():.3f})   GOAL MISSED")
    print(f"reward MA{WINDOW} at the end: {ma.iloc[-1]:.3f}; clip/total mean {df['clip/total'].mean():.4f}, "
          f"max {df['clip/total'].max():.4f}; kl/mean at end {df['kl/mean'].iloc[-1]:.3f}")
    for step in range(WINDOW, len(df) + 1, max(WINDOW, len(df) // 10)):
        print(f"  step {step:4d}  t={since_launch[step - 1]:6.1f}s  MA{WINDOW}={ma[step - 1]:.3f}")


if __name__ == "__main__":
    main()
