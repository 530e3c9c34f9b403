"""Benchmark: the reward-hacking lens fires on the hacking recipe and stays quiet on the honest demo.

Trains N seeds of each on the CPU, one after another, and reads each run's events (the run doctor):
- hack: grpo_lab/configs/reward-hacking.yaml (a length reward the tiny model games by padding);
- honest: the built-in demo (correctness alone) with the same held-out evaluation, so every lens signal can fire.
Prints, per run, the lens's findings (which signal, first step fired) and the doctor's other findings; then
the false alarms (honest runs with a lens finding) and the detections (hack runs with one), with the signal
that fired first. Usage:
  .venv/bin/python bench/bench_reward_hacking.py [--seeds 5] [--steps 30] [--honest-prompts 32] [--keep DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grpo_lab import CONFIGS  # noqa: E402
from grpo_lab.rundir.reader import TableReader  # noqa: E402

LENS = ("reward_dominated_by", "reward_tracks_length", "strict_check_disagrees", "eval_diverges", "reward_collapse")


def train(runs: Path, name: str, seed: int, options: list[str]) -> float:
    start = time.time()
    subprocess.run([sys.executable, "-m", "grpo_lab.trainer", "--runs-dir", str(runs), "--name", name, "--seed",
                    str(seed), "--stop-on", "none", *options], cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.time() - start


def table(run: Path, name: str):
    read = TableReader(run, name).read()
    return read.table.to_pandas() if read.table is not None else None


def summary(run: Path) -> dict:
    events, scalars = table(run, "events"), table(run, "scalars")
    found = [] if events is None else list(zip(events["step"].astype(int), events["kind"]))
    accuracy = scalars["eval/accuracy"].dropna() if "eval/accuracy" in scalars else []
    return {"lens": [(s, k) for s, k in found if k in LENS], "other": [(s, k) for s, k in found if k not in LENS],
            "reward": (scalars["reward/mean"].iloc[:5].mean(), scalars["reward/mean"].iloc[-5:].mean()),
            "accuracy": (accuracy.iloc[0], accuracy.iloc[-1]) if len(accuracy) else (float("nan"),) * 2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1")
    parser.add_argument("--steps", type=int, default=30, help="training steps of every run (the recipe's 30)")
    parser.add_argument("--honest-prompts", type=int, default=32, help="the honest demo's prompts_per_step "
                        "(its default 32; the recipe has 8)")
    parser.add_argument("--keep", default="", help="a folder to keep the runs in (default: a temporary one)")
    args = parser.parse_args()
    setups = {
        "honest": ["--eval-fraction", "0.25", "--eval-every", "5", "--max-steps", str(args.steps),
                   "--prompts-per-step", str(args.honest_prompts)],
        "hack": ["--config", str(CONFIGS / "reward-hacking.yaml"), "--max-steps", str(args.steps)],
    }
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(args.keep or tmp)
        runs.mkdir(parents=True, exist_ok=True)
        results: dict[str, list[dict]] = {k: [] for k in setups}
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            for setup, options in setups.items():
                name = f"{setup}-{seed}"
                seconds = train(runs, name, seed, options)
                row = {"seed": seed, "seconds": seconds, **summary(runs / name)}
                results[setup].append(row)
                lens = ", ".join(f"{k}@{s}" for s, k in row["lens"]) or "none"
                other = ", ".join(f"{k}@{s}" for s, k in row["other"]) or "none"
                print(f"{name:9s} {seconds:6.0f} s  reward {row['reward'][0]:+.2f} -> {row['reward'][1]:+.2f}  "
                      f"held-out accuracy {row['accuracy'][0]:.2f} -> {row['accuracy'][1]:.2f}  lens: {lens}  "
                      f"other findings: {other}", flush=True)
    honest, hack = results["honest"], results["hack"]
    alarms = sum(bool(r["lens"]) for r in honest)
    detected = [r for r in hack if r["lens"]]
    steps = sorted(min(r["lens"])[0] for r in detected)
    # every kind fired at a run's first step (several fire at once when a window fills)
    first = Counter(k for r in detected for s, k in r["lens"] if s == min(r["lens"])[0])
    print(f"\nhonest demo ({args.honest_prompts} prompts/step, {args.steps} steps): false alarms {alarms} of "
          f"{len(honest)} runs ({sum(len(r['lens']) for r in honest)} lens findings)")
    print(f"hacking recipe ({args.steps} steps): detected {len(detected)} of {len(hack)} runs; first step fired "
          f"{steps}; fired at that step (runs) {dict(first)}")
    every = Counter(k for r in hack for _s, k in r["lens"])
    print(f"every lens finding on the hacking recipe: {dict(every)}")


if __name__ == "__main__":
    main()
