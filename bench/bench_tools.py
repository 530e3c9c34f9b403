"""Benchmark: the calculator tool against the same run without it, on --task big_arithmetic, over seeds.

Two arms on one base (the built-in model, 3-digit sums, the task's defaults: lr 5e-4, 500 warm-start
steps, 20 new tokens, correctness on numbers only): `no_tools` and `tools` (--tools calculator).
Everything else is equal, so with one seed both arms start from the same warm-started weights
(checkpoints/initial is byte for byte the same); only the tool differs. Every (arm, seed)
is a real `python -m grpo_lab.trainer` run launched through grpo_lab.launching.sweep (the dashboard's launch
queue), so the dashboard's Compare page opens it with ?sweep=tools.

Per arm: n seeds, the final reward (reward/mean of the last step) and the mean reward of the last 5
steps, with 95% t-intervals over seeds, and the tool calls per rollout at the first and last step;
then tools against no_tools (Welch's interval, grpo_lab/rundir/variants.py, through
bench/sweep_stats.py); then the curves, the mean over seeds of reward and tool calls per rollout at
a few steps. Figures of a run here: README, "Tools and multi-turn rollouts".

    .venv/bin/python bench/bench_tools.py                          # 3 seeds x 30 steps, 8 prompts x G=8 a step
    .venv/bin/python bench/bench_tools.py --seeds 5 --max-steps 60
    .venv/bin/python bench/bench_tools.py --runs-dir /tmp/bench-tools --reuse   # report an existing sweep again
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import sweep_stats  # noqa: E402

from grpo_lab.rundir import variants  # noqa: E402

ARMS = {"no_tools": {}, "tools": {"tools": "calculator"}}  # the first is the baseline
CALLS = "tools/calls_per_rollout"


def value_at(column: str, index: int):
    """The run's `column` at row `index` of its scalars (0: the first step, -1: the last); nan
    when the run never logged it (the no_tools arm has no tool columns)."""
    def fn(df) -> float:
        values = df[column].dropna() if column in df else []
        return float(values.iloc[index]) if len(values) else math.nan
    return fn


def curves_markdown(frames: dict, arm_of: dict[str, str], steps: list[int]) -> str:
    """Mean over seeds, per arm, of reward/mean and tool calls per rollout at the given steps.

    >>> import pandas as pd
    >>> f = lambda r, c: pd.DataFrame({"step": [1, 2], "reward/mean": r, CALLS: c})
    >>> frames = {"a": f([0.5, 1.0], [0.5, 1.0]), "b": pd.DataFrame({"step": [1, 2], "reward/mean": [0.0, 0.0]})}
    >>> print(curves_markdown(frames, {"a": "tools", "b": "no_tools"}, [1, 2]))
    | step | no_tools reward | tools reward | tools calls/rollout |
    |---|---|---|---|
    | 1 | 0.000 | 0.500 | 0.50 |
    | 2 | 0.000 | 1.000 | 1.00 |
    """
    arms = list(dict.fromkeys(arm_of[name] for name in frames))
    arms.sort(key=lambda a: list(ARMS).index(a) if a in ARMS else len(ARMS))
    with_calls = [a for a in arms if any(CALLS in df for n, df in frames.items() if arm_of[n] == a)]
    head = ["step", *(f"{a} reward" for a in arms), *(f"{a} calls/rollout" for a in with_calls)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def mean_at(arm: str, column: str, step: int) -> float:
        values = [float(df.loc[df["step"] == step, column].iloc[0]) for n, df in frames.items()
                  if arm_of[n] == arm and column in df and (df["step"] == step).any()]
        return variants.mean_ci(values)[0]

    for step in steps:
        cells = [str(step), *(f"{mean_at(a, 'reward/mean', step):.3f}" for a in arms),
                 *(f"{mean_at(a, CALLS, step):.2f}" for a in with_calls)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 per arm (default 3)")
    parser.add_argument("--max-steps", type=int, default=30, help="training steps per run (default 30)")
    parser.add_argument("--prompts-per-step", type=int, default=8, help="prompts per step (default 8; G stays 8)")
    parser.add_argument("--runs-dir", type=Path, default=Path("/tmp/bench-tools"), help="where the runs go")
    parser.add_argument("--reuse", action="store_true", help="report from the sweep in --runs-dir, train nothing")
    parser.add_argument("--max-runs", type=int, default=2, help="runs training at once (GRPO_LAB_MAX_RUNS)")
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of every run (default 1)")
    parser.add_argument("--json", type=Path, help="also write the per-run figures to this file")
    args = parser.parse_args()

    steps = args.max_steps
    base = {"task": "big_arithmetic", "max_steps": steps, "prompts_per_step": args.prompts_per_step,
            "logging": "scalars", "checkpoint_every": steps + 1}  # no checkpoint: only the figures are wanted
    runs = sweep_stats.plan_variants("tools", base, ARMS, list(range(args.seeds)))
    if not args.reuse:
        sweep_stats.launch_and_wait(runs, args.runs_dir, args.max_runs, args.threads)

    # the last step's reward is one batch of 64 samples at temperature 1: the last 5 steps' mean is steadier
    extras = [("reward, last 5 steps", lambda df: float(df["reward/mean"].tail(5).mean())),
              ("calls/rollout, step 1", value_at(CALLS, 0)), ("calls/rollout, last step", value_at(CALLS, -1))]
    text, table = sweep_stats.report(args.runs_dir, runs, extras,
                                     digits={"calls/rollout, step 1": 2, "calls/rollout, last step": 2})
    frames = {r.name: sweep_stats.scalars(args.runs_dir / r.name) for r in runs}
    marks = sorted({1, *range(5, steps, 5), steps})
    print(f"\nbig_arithmetic, built-in model, {steps} steps of {args.prompts_per_step} prompts x G=8, seeds "
          f"0-{args.seeds - 1}; final reward = reward/mean of the last step; 95% t-intervals over seeds "
          f"(grpo_lab/rundir/variants.py); runs in {args.runs_dir} (Compare: ?sweep=tools)\n")
    print(text)
    print("\nMean over seeds by step:\n")
    print(curves_markdown(frames, {r.name: r.variant for r in runs}, marks))
    if args.json:
        args.json.write_text(json.dumps({"max_steps": steps, "seeds": args.seeds,
                                         "runs": table.to_dict("records")}, indent=1))


if __name__ == "__main__":
    main()
