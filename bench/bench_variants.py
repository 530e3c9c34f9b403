"""Benchmark: GRPO variants over seeds, as one sweep, on the built-in demo (or the SmolLM2 recipe).

Each variant is a set of trainer options on a shared base; every (variant, seed) is a real
`python -m grpo_lab.trainer` run launched through grpo_lab.launching.sweep (the dashboard's launch queue,
GRPO_LAB_MAX_RUNS at once), so the dashboard's Compare page opens the same comparison with
?sweep=variants (or ?sweep=variants-smollm2). All variants run the same number of steps; dynamic
sampling pays for the groups it drops with extra sampling rounds, so the table gives the completions
each variant sampled.

Per variant: n seeds, mean and 95% t-interval over seeds of the final reward (`reward/mean` of the
last step), the best step, the reward AUC (mean over steps), the final KL, the completions sampled,
groups/frac_zero_std (mean over steps), and on SmolLM2 the last held-out accuracy (greedy,
eval_every 5); the IQM of the final reward; then every variant against the first with Welch's
interval and a plain verdict. All statistics are grpo_lab/rundir/variants.py's (bench/sweep_stats.py).

    .venv/bin/python bench/bench_variants.py                                   # demo: chapter, dynamic, dr_grpo; 5 seeds x 200 steps
    .venv/bin/python bench/bench_variants.py --max-steps 100 --variants chapter,gspo
    .venv/bin/python bench/bench_variants.py --model smollm2 --seeds 3        # the recipe's 40 steps (make smollm2)
    .venv/bin/python bench/bench_variants.py --runs-dir /tmp/bv --reuse        # report an existing sweep again
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

RECIPE = ROOT / "grpo_lab" / "configs" / "smollm2-word-problems.yaml"
# Each variant: trainer options on top of the base. With the SmolLM2 recipe's one pass per batch every
# ratio is 1, so GSPO's sequence ratio changes nothing there; the demo runs 4 passes, where it does.
VARIANTS = {
    "chapter": {},
    "dynamic": {"dynamic_sampling": True, "dynamic_sampling_rounds": 4},
    "mask_truncated": {"mask_truncated": True},
    "mask_truncated_dynamic": {"mask_truncated": True, "dynamic_sampling": True, "dynamic_sampling_rounds": 4},
    "dr_grpo": {"std_mode": "none", "loss_aggregation": "constant"},
    "batch_std": {"std_mode": "batch"},
    "gspo": {"importance_level": "sequence", "epsilon": 3e-4, "epsilon_high": 4e-4},
}


def last_value(column: str):
    """The run's last non-empty value of `column` (nan when the run never logged it)."""
    def fn(df) -> float:
        values = df[column].dropna() if column in df else []
        return float(values.iloc[-1]) if len(values) else math.nan
    return fn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("demo", "smollm2"), default="demo",
                        help="demo: the built-in model and task; smollm2: grpo_lab/configs/smollm2-word-problems.yaml")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 per variant (default 5)")
    parser.add_argument("--max-steps", type=int, help="training steps per run (default: 200 on the demo, the "
                        "recipe's 40 on SmolLM2)")
    parser.add_argument("--variants", default="chapter,dynamic,dr_grpo",
                        help=f"comma-separated, the first is the baseline; of {', '.join(VARIANTS)}")
    parser.add_argument("--runs-dir", type=Path, help="where the runs go (default /tmp/bench-variants[-smollm2])")
    parser.add_argument("--reuse", action="store_true", help="report from the sweep in --runs-dir, train nothing")
    parser.add_argument("--retrain-unfinished", action="store_true", help="keep the sweep's finished runs in "
                        "--runs-dir, train the others again from the start")
    parser.add_argument("--max-runs", type=int, default=2, help="runs training at once (GRPO_LAB_MAX_RUNS)")
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of every run (default 1: "
                        "several runs share the cores)")
    parser.add_argument("--json", type=Path, help="also write the per-run figures to this file")
    args = parser.parse_args()
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    if bad := [v for v in names if v not in VARIANTS]:
        parser.error(f"--variants: unknown variant {bad[0]!r}; one of {', '.join(VARIANTS)}")

    from grpo_lab.trainer.config import from_dict, read_config_file
    smol = args.model == "smollm2"
    # stop_on none: every run trains its steps; a run the doctor stopped would be compared at an earlier step
    base = {**(read_config_file(str(RECIPE)) if smol else {}), "logging": "scalars", "stop_on": "none"}
    if args.max_steps:
        base["max_steps"] = args.max_steps
    steps = args.max_steps or base.get("max_steps") or 200
    base["checkpoint_every"] = steps + 1  # no checkpoint: only the figures are wanted
    G = from_dict({k: v for k, v in base.items()}).group_size
    sweep = "variants-smollm2" if smol else "variants"
    runs_dir = args.runs_dir or Path(f"/tmp/bench-{sweep}")
    runs = sweep_stats.plan_variants(sweep, base, {v: VARIANTS[v] for v in names}, list(range(args.seeds)))
    if not args.reuse:
        sweep_stats.launch_and_wait(runs, runs_dir, args.max_runs, args.threads, args.retrain_unfinished)

    extras = [("completions sampled", lambda df: float(((df["groups/kept"] + df["groups/dropped"]) * G).sum())),
              ("frac_zero_std", lambda df: float(df["groups/frac_zero_std"].mean()))]
    if smol:
        extras.append(("held-out accuracy", last_value("eval/accuracy")))
    text, table = sweep_stats.report(runs_dir, runs, extras, digits={"completions sampled": 0, "frac_zero_std": 2})
    print(f"\n{'SmolLM2 word-problem recipe' if smol else 'built-in demo'}, {steps} steps, seeds 0-{args.seeds - 1}; "
          f"final reward = reward/mean of the last step; 95% t-intervals over seeds (grpo_lab/rundir/variants.py); "
          f"runs in {runs_dir} (Compare: ?sweep={sweep})\n")
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"model": args.model, "max_steps": steps, "seeds": args.seeds,
                                         "runs": table.to_dict("records")}, indent=1))


if __name__ == "__main__":
    main()
