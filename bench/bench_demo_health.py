"""Benchmark: the built-in demo at its defaults on several seeds raises no run-doctor finding.

For each seed, runs `python -m grpo_lab.trainer` with its defaults (the one-click demo) in a temporary
runs folder and prints its findings (tables/events), the peaks the doctor's thresholds watch (kl/mean,
grad/norm, ratio/max), the completions cut at max_new_tokens that were rewarded, and the reward at the
end. Goal: no finding on any seed, reward MA20 at the end >= 0.8.

Usage: .venv/bin/python bench/bench_demo_health.py [--seeds 0 1 2 3 4] [--parallel 2] [--steps 200] [--runs-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent


def run(seed: int, runs: Path, steps: int) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    if not (runs / f"seed{seed}" / "status.json").exists():  # --runs-dir: a seed run before is read again
        subprocess.run([sys.executable, "-m", "grpo_lab.trainer", "--runs-dir", str(runs), "--name", f"seed{seed}",
                        "--seed", str(seed), "--max-steps", str(steps)], cwd=ROOT, check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    status = json.loads((runs / f"seed{seed}" / "status.json").read_text())
    tables = runs / f"seed{seed}" / "tables"
    con = duckdb.connect()
    peaks = con.sql(f"""select max("kl/mean"), arg_max(step, "kl/mean"), max("grad/norm"), max("ratio/max"),
                        avg("reward/mean") filter (where step > {steps - 20})
                        from read_parquet('{tables}/scalars/*.parquet')""").fetchall()[0]
    cut = con.sql(f"""select count(*) filter (where truncated and reward > 0), count(*) filter (where truncated)
                      from read_parquet('{tables}/samples/*.parquet')""").fetchall()[0]
    events = list((tables / "events").glob("*.parquet"))
    findings = (con.sql(f"select step, kind from read_parquet('{tables}/events/*.parquet') order by step").fetchall()
                if events else [])
    return {"seed": seed, "wall_s": status["updated_at"] - status["started_at"], "kl_max": peaks[0], "kl_max_step": peaks[1],
            "grad_max": peaks[2], "ratio_max": peaks[3], "reward_end": peaks[4], "cut_rewarded": cut[0],
            "cut": cut[1], "findings": findings}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--runs-dir", help="keep the runs here (default: a temporary folder); seeds already there "
                        "are read, not run again")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.parallel) as pool:
        runs = Path(args.runs_dir or tmp)
        results = pool.map(lambda s: run(s, runs, args.steps), args.seeds)
        print("seed  wall_s  kl/mean max (step)  grad/norm max  ratio/max max  reward MA20 end  "
              "truncated rewarded/all  findings")
        for r in results:
            print(f"{r['seed']:4d}  {r['wall_s']:6.0f}  {r['kl_max']:9.3g} ({r['kl_max_step']:3d})  {r['grad_max']:13.3g}"
                  f"  {r['ratio_max']:13.3g}  {r['reward_end']:14.3f}  {r['cut_rewarded']:10d}/{r['cut']:<6d}"
                  f"  {r['findings'] or 'none'}", flush=True)


if __name__ == "__main__":
    main()
