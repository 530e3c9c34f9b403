"""Does a reward model learn what a labeler prefers, and does GRPO with it move that property?

    .venv/bin/python bench/bench_reward_model.py                 # both parts below
    .venv/bin/python bench/bench_reward_model.py --part synthetic --groups 40 --epochs 5

A scripted labeler ranks each group's completions shortest first (equal lengths share a rank: no pair),
through the public API (labels.add); grpo-lab-train-rm learns from those ranks; we report the held-out
pairwise accuracy (pairs of prompts the model never trained on).

- `synthetic`: a run written as the trainer writes one (RunWriter), its completions arithmetic-style
  answers padded with 0-4 filler words ("7", "7 is it", "so the sum is 7").
- `loop`: the loop as a person would walk it. A GRPO run of the built-in model (a short warm start,
  8 new tokens, so lengths vary) logs its samples; the labeler ranks them; the reward model trained
  on them is then the only reward of a fresh GRPO run from the same start, beside a control run with
  the `correctness` reward. We report completion length (tokens, EOS included), first 5 -> last 5 steps.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pandas as pd  # noqa: E402

from grpo_lab.finished_runs.reward_model_training import train_rm  # noqa: E402
from grpo_lab.rundir import labels  # noqa: E402
from grpo_lab.rundir.layout import RunPaths  # noqa: E402
from grpo_lab.rundir.query import query  # noqa: E402
from grpo_lab.rundir.writer import RunWriter  # noqa: E402

WORDS = ["is", "the", "sum", "so", "it", "yes", "ok", "a", "b", "c", "d", "e"]
# the GRPO runs of the loop: a short warm start leaves the policy half-way to "a number, then stop"
POLICY = ["--sft-steps", "10", "--max-new-tokens", "8", "--prompts-per-step", "16", "--group-size", "4"]


def answer(rng: random.Random, a: int, b: int) -> str:
    """An answer padded with 0-4 filler words: its length is what the labeler judges."""
    text = str(a + b if rng.random() < 0.6 else rng.randint(0, 10))
    for _ in range(rng.randint(0, 4)):
        text = (text + " " + rng.choice(WORDS)) if rng.random() < 0.5 else (rng.choice(WORDS) + " " + text)
    return text


def rank_shortest_first(run: Path, groups: list[tuple[int, int]]) -> None:
    """The scripted labeler: each group ranked by completion length, shortest 1."""
    rows, _ = query(run, "samples", 'SELECT step, "group", sample_idx, completion FROM {src}')
    for (step, group), g in rows.groupby(["step", "group"]):
        if (step, group) not in groups:
            continue
        lengths = sorted(set(g["completion"].str.len()))
        for i, text in zip(g["sample_idx"], g["completion"]):
            labels.add(run, step=int(step), group=int(group), sample=int(i), rank=lengths.index(len(text)) + 1,
                       labeler="scripted")


def synthetic_run(root: Path, groups: int, G: int, seed: int) -> Path:
    rng = random.Random(seed)
    run = root / "synthetic"
    run.mkdir(parents=True)
    writer = RunWriter(RunPaths(run), flush_seconds=0)
    cols: dict[str, list] = {k: [] for k in ("step", "group", "sample_idx", "prompt_id", "prompt", "completion")}
    for n in range(groups):
        a, b = rng.randint(0, 5), rng.randint(0, 5)
        for i in range(G):
            for k, v in zip(cols, (n // 4 + 1, n % 4, i, f"{a}+{b}#{n}", f"{a}+{b}=", answer(rng, a, b))):
                cols[k].append(v)
    writer.log("samples", cols)
    writer.close()
    rank_shortest_first(run, [(n // 4 + 1, n % 4) for n in range(groups)])
    return run


def train(runs: Path, name: str, steps: int, seed: int, rewards: dict, params: dict | None = None) -> Path:
    config = runs.parent / f"{name}.json"
    config.write_text(json.dumps({"rewards": rewards, "reward_params": params or {}}))
    done = subprocess.run([sys.executable, "-m", "grpo_lab.trainer", "--runs-dir", str(runs), "--name", name,
                           "--config", str(config), "--max-steps", str(steps), "--seed", str(seed), *POLICY],
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    return runs / name


def lengths(run: Path) -> tuple[float, float]:
    df, _ = query(run, "scalars", 'SELECT step, "completion/length_mean" AS n FROM {src} ORDER BY step')
    return float(df["n"].head(5).mean()), float(df["n"].tail(5).mean())


def loop(root: Path, groups: int, epochs: int, steps: int, seed: int) -> None:
    runs = root / "runs"
    start = time.time()
    sampled = train(runs, "sampled", -(-groups // 16), seed + 1, {"correctness": 1.0})
    rank_shortest_first(sampled, [(s, g) for s in range(1, 1 + -(-groups // 16)) for g in range(16)][:groups])
    print(f"loop: {groups} groups of the policy's own samples rated in {time.time() - start:.0f} s")
    figures = train_rm([str(sampled)], str(root / "rm-loop"), epochs=epochs, seed=seed)
    print(f"RESULT loop: held-out pairwise accuracy {figures['heldout_accuracy']:.3f} on {figures['heldout_pairs']} "
          f"pairs (train {figures['train_accuracy']:.3f} on {figures['train_pairs']})")
    rm = train(runs, "with-rm", steps, seed, {"reward_model": 1.0},
               {"reward_model": {"model": str(root / "rm-loop"), "device": "cpu"}})
    control = train(runs, "control", steps, seed, {"correctness": 1.0})
    for name, run in (("reward model", rm), ("control (correctness)", control)):
        first, last = lengths(run)
        print(f"RESULT loop: GRPO {steps} steps with {name}: completion length {first:.2f} -> {last:.2f} tokens "
              "(mean of the first 5 -> last 5 steps)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("both", "synthetic", "loop"), default="both")
    parser.add_argument("--groups", type=int, default=80, help="groups the labeler ranks")
    parser.add_argument("--group-size", type=int, default=4, help="synthetic part only")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--grpo-steps", type=int, default=30, help="loop part: steps of each GRPO run")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.part in ("both", "synthetic"):
            run = synthetic_run(Path(tmp), args.groups, args.group_size, args.seed)
            figures = train_rm([str(run)], str(Path(tmp) / "rm"), epochs=args.epochs, seed=args.seed)
            print(f"RESULT synthetic: held-out pairwise accuracy {figures['heldout_accuracy']:.3f} on "
                  f"{figures['heldout_pairs']} pairs (train {figures['train_accuracy']:.3f} on "
                  f"{figures['train_pairs']}), {figures['seconds']} s training")
        if args.part in ("both", "loop"):
            loop(Path(tmp), args.groups, args.epochs, args.grpo_steps, args.seed)


if __name__ == "__main__":
    main()
