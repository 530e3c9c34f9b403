"""Benchmark: cost of --report-to. Goal: the step loop no slower with every tracker on (<= 3%), since each
tracker writes from a thread of its own; and the time a run waits at its end for them.

Runs the same seeded run with `--report-to none` and `--report-to tensorboard,wandb,trackio` (wandb offline,
trackio's store in a temporary folder), alternating, and compares the step loop's seconds (status.json
`train_seconds`) and the whole process's. Needs requirements-trackers.txt.
Usage: .venv/bin/python bench/bench_report_to.py [--steps 50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALL = "tensorboard,wandb,trackio"


def run(runs: str, name: str, report_to: str, steps: int) -> tuple[float, float]:
    """(step loop seconds, process seconds) of one run."""
    env = {**os.environ, "TRACKIO_DIR": str(Path(runs) / "trackio"), "WANDB_MODE": "offline"}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "grpo_lab.trainer", "--runs-dir", runs, "--name", name, "--report-to",
                    report_to, "--max-steps", str(steps), "--checkpoint-every", str(steps)],
                   cwd=ROOT, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    whole = time.perf_counter() - start
    return json.loads((Path(runs) / name / "status.json").read_text())["train_seconds"], whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    loop: dict[str, list[float]] = {"none": [], ALL: []}
    whole: dict[str, list[float]] = {"none": [], ALL: []}
    with tempfile.TemporaryDirectory() as runs:
        for r in range(args.repeats):
            for mode in ("none", ALL) if r % 2 == 0 else (ALL, "none"):
                a, b = run(runs, f"{'none' if mode == 'none' else 'all'}-{r}", mode, args.steps)
                loop[mode].append(a)
                whole[mode].append(b)
    off, on = statistics.median(loop["none"]), statistics.median(loop[ALL])
    print(f"{args.steps} steps, {args.repeats} runs each; loop seconds none: {loop['none']}, {ALL}: {loop[ALL]}")
    print(f"median per step: none {1000 * off / args.steps:.1f} ms, {ALL} {1000 * on / args.steps:.1f} ms")
    print(f"report_to overhead in the step loop: {100 * (on / off - 1):+.2f}%   goal <= 3%")
    print(f"whole process (start, warm start, loop, trackers' last writes): "
          f"none {statistics.median(whole['none']):.1f} s, {ALL} {statistics.median(whole[ALL]):.1f} s")


if __name__ == "__main__":
    main()
