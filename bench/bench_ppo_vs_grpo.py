"""PPO against GRPO on the same task and seed: the chapter's claim, measured.

GRPO drops the value model but samples G responses per prompt; PPO trains a value model alongside
the policy and needs only one. Each row is one real `python -m grpo_lab.trainer` run in its own process
(so peak memory is that run's own), on the built-in task, with the same seed and prompts per step:

    grpo        P prompts x G responses (the default demo)
    ppo         P prompts x G responses: the same samples per step as GRPO
    ppo-1       P prompts x 1 response:  the same prompts per step, PPO's usual form

    .venv/bin/python bench/bench_ppo_vs_grpo.py                      # 200 steps, 32 prompts, G = 8
    .venv/bin/python bench/bench_ppo_vs_grpo.py --steps 50 --json out.json
    .venv/bin/python bench/bench_ppo_vs_grpo.py --runs-dir runs    # keep the runs: the dashboard's
                                                                    # PPO vs GRPO page then shows them

Figures, per run: reward after N steps (mean `reward/mean` of the last 10 steps: the sampled
policy's accuracy, not a greedy evaluation), of the first 10, and the best 10-step mean on the way;
seconds per step (median `time/step_s`); samples per step; trained parameters and peak memory (from
status.json; on CPU the process's peak resident memory, mostly Python, torch and transformers
themselves); and the training state the trained parameters need (float32 weights, gradients and
AdamW's two moments: 16 bytes each), which is what the value model adds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grpo_lab.rundir.layout import RunPaths, read_json, visible_parts  # noqa: E402

LAST = 10  # steps averaged for "reward after N steps"


def run(runs: Path, key: str, algo: str, group_size: int, args: argparse.Namespace) -> dict:
    name = f"bench-{key}-{time.strftime('%Y%m%d-%H%M%S')}"
    cmd = [sys.executable, "-m", "grpo_lab.trainer", "--runs-dir", str(runs), "--name", name, "--algo", algo,
           "--seed", str(args.seed), "--max-steps", str(args.steps), "--prompts-per-step", str(args.prompts_per_step),
           "--group-size", str(group_size), "--logging", "scalars", "--checkpoint-every", str(args.steps + 1),
           *args.extra]
    start = time.time()
    env = {**os.environ, **({"OMP_NUM_THREADS": str(args.threads)} if args.threads else {})}
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stderr=subprocess.DEVNULL)
    paths = RunPaths(runs / name)
    scalars = pd.concat([pd.read_parquet(p) for p in visible_parts(paths.table("scalars"))]).sort_values("step")
    status = read_json(paths.status)
    return {
        "run": key,
        "run_dir": str(runs / name) if args.runs_dir else None,
        "algo": algo,
        "prompts_per_step": args.prompts_per_step,
        "samples_per_step": args.prompts_per_step * group_size,
        f"reward_last{LAST}": float(scalars["reward/mean"].tail(LAST).mean()),
        "reward_first": float(scalars["reward/mean"].head(LAST).mean()),
        "reward_best": float(scalars["reward/mean"].rolling(LAST).mean().max()),
        "seconds_per_step": float(scalars["time/step_s"].median()),
        "trained_params": int(status["trained_params"]),
        "peak_memory_mb": float(status["peak_memory_mb"]),
        # float32 weights + gradients + AdamW's two moments: 16 bytes per trained parameter
        "train_state_mb": int(status["trained_params"]) * 16 / 2**20,
        "process_s": time.time() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="training steps per run (N)")
    parser.add_argument("--prompts-per-step", type=int, default=32)
    parser.add_argument("--group-size", type=int, default=8, help="G for grpo and ppo; ppo-1 uses 1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", default=["grpo", "ppo", "ppo-1"], help="rows to run")
    parser.add_argument("--threads", type=int, help="OMP_NUM_THREADS for every run (default: torch's own)")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--runs-dir", help="keep the run directories here (default: a temporary folder)")
    parser.add_argument("extra", nargs="*", help="further trainer flags after --, e.g. -- --lr 1e-3")
    args = parser.parse_args()
    plans = {"grpo": ("grpo", args.group_size), "ppo": ("ppo", args.group_size), "ppo-1": ("ppo", 1)}

    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(args.runs_dir or tmp)
        rows = [run(runs, key, *plans[key], args) for key in args.only]

    print(f"\n{args.steps} steps, seed {args.seed}, built-in task; "
          f"reward = mean reward/mean of the last {LAST} steps\n")
    print(markdown(pd.DataFrame(rows).drop(columns="run_dir").rename(columns=HEADERS)))
    if args.json:
        Path(args.json).write_text(json.dumps({"steps": args.steps, "seed": args.seed, "rows": rows}, indent=2))


HEADERS = {"prompts_per_step": "prompts/step", "samples_per_step": "samples/step",
           f"reward_last{LAST}": f"reward (last {LAST})", "reward_first": f"reward (first {LAST})",
           "reward_best": f"best {LAST}-step mean",
           "seconds_per_step": "s/step", "trained_params": "trained params", "peak_memory_mb": "peak MB",
           "train_state_mb": "train state MB",
           "process_s": "process s"}


def markdown(table: pd.DataFrame) -> str:
    """A GitHub table: rewards and s/step with 3 decimals, other floats with 1."""
    def cell(column: str, value) -> str:
        if isinstance(value, float):
            return f"{value:.3f}" if "reward" in column or "mean" in column or column == "s/step" else f"{value:.1f}"
        return f"{value:,}" if isinstance(value, int) else str(value)

    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    for record in table.to_dict("records"):
        lines.append("| " + " | ".join(cell(c, record[c]) for c in table.columns) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
