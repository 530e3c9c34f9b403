"""Benchmark: SmolLM2-135M-Instruct learns word problems in a short CPU run.

Trains with grpo_lab/configs/smollm2-word-problems.yaml (40 steps, G=4, 4 prompts, 64 new tokens) in a
temporary runs folder, then prints the sampled correctness per block of 5 steps, the held-out
greedy accuracy at each evaluation, the seconds per step, and completions from the first and
last steps. Goal: a non-zero correctness that rises. Needs scripts/get-smollm2.sh first.

    .venv/bin/python bench/bench_smollm2_learning.py [--seed N]
    .venv/bin/python bench/bench_smollm2_learning.py --run runs/NAME   # summarise a finished run
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grpo_lab.rundir.layout import RunPaths, visible_parts  # noqa: E402

CONFIG = ROOT / "grpo_lab" / "configs" / "smollm2-word-problems.yaml"
BLOCK = 5


def summarise(run: Path) -> None:
    con = duckdb.connect()
    samples, scalars = (f"read_parquet({[str(p) for p in visible_parts(RunPaths(run).table(name))]})"
                        for name in ("samples", "scalars"))
    print(f"{run.name}: sampled completions per block of {BLOCK} steps")
    print("  steps    correct  mean tokens  truncated")
    for first, correct, length, truncated in con.execute(f"""
            select (step - 1) // {BLOCK} * {BLOCK} + 1, avg("rewards/correctness"), avg(length),
                   avg(truncated::int)
            from {samples} group by 1 order by 1""").fetchall():
        print(f"  {first:3d}-{first + BLOCK - 1:<3d}  {correct:7.3f}  {length:11.1f}  {truncated:9.3f}")
    evals = con.execute(f"""select step, "eval/accuracy", "eval/prompts" from {scalars}
                            where "eval/accuracy" is not null order by step""").fetchall()
    if evals:
        print(f"held-out greedy accuracy ({int(evals[0][2])} prompts): "
              + ", ".join(f"step {s} {a:.3f}" for s, a, _ in evals))
    step_s, first_s, last_s = con.execute(f"""select median("time/step_s"), min(step), max(step)
                                              from {scalars}""").fetchone()
    print(f"seconds per step: median {step_s:.1f} over steps {first_s}-{last_s}")
    for step in (first_s, last_s):
        print(f"step {step} completions (reward):")
        for completion, reward in con.execute(f"""select completion, "rewards/correctness" from {samples}
                                                  where step = ? order by prompt_id, sample_idx limit 4""",
                                              [step]).fetchall():
            print(f"  {reward:.0f}  {completion[:110]!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run", type=Path, help="summarise this finished run directory instead of training")
    args = parser.parse_args()
    if args.run:
        summarise(args.run)
        return
    with tempfile.TemporaryDirectory() as runs:
        start = time.time()
        subprocess.run([sys.executable, "-m", "grpo_lab.trainer", "--config", str(CONFIG), "--runs-dir", runs,
                        "--name", f"smollm2-seed{args.seed}", "--seed", str(args.seed)],
                       cwd=ROOT, check=True, stderr=subprocess.DEVNULL)
        print(f"process wall {time.time() - start:.0f} s (model load, 40 steps, 9 evaluations)")
        summarise(Path(runs) / f"smollm2-seed{args.seed}")


if __name__ == "__main__":
    main()
