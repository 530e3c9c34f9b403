"""Benchmark: cost of full logging. Goal: <= 3% of step time (full logging vs logging off, same run).

Runs the same seeded run with `--logging off` and `--logging full`, alternating, and compares the
time spent in the step loop (status.json `train_seconds`: sampling, updates, logging, checkpoints).
Usage: .venv/bin/python bench/bench_logging_overhead.py [--steps 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def loop_seconds(runs: str, name: str, level: str, steps: int) -> float:
    subprocess.run([sys.executable, "-m", "grpo_lab.trainer", "--runs-dir", runs, "--name", name, "--logging", level,
                    "--max-steps", str(steps), "--checkpoint-every", str(steps)],
                   cwd=ROOT, check=True, stderr=subprocess.DEVNULL)
    return json.loads((Path(runs) / name / "status.json").read_text())["train_seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"off": [], "full": []}
    with tempfile.TemporaryDirectory() as runs:
        for r in range(args.repeats):
            for level in ("off", "full") if r % 2 == 0 else ("full", "off"):
                times[level].append(loop_seconds(runs, f"{level}-{r}", level, args.steps))
        parts = sorted((Path(runs) / "full-0" / "tables").rglob("part-*.parquet"))
        size = sum(p.stat().st_size for p in parts)
    off, full = statistics.median(times["off"]), statistics.median(times["full"])
    print(f"{args.steps} steps, {args.repeats} runs each; loop seconds off: {times['off']}, full: {times['full']}")
    print(f"median per step: off {1000 * off / args.steps:.1f} ms, full {1000 * full / args.steps:.1f} ms")
    print(f"logging overhead: {100 * (full / off - 1):+.2f}%   goal <= 3%")
    print(f"full logging wrote {len(parts)} part files, {size / 1e6:.2f} MB after compaction")


if __name__ == "__main__":
    main()
