"""PPO against GRPO on the built-in task, over seeds: the chapter's claim, measured as a sweep.

GRPO drops the value model but samples G responses per prompt; PPO trains a value model alongside
the policy and needs only one. Three variants, each a real `python -m grpo_lab.trainer` run per seed,
launched as one sweep (grpo_lab.launching.sweep: the dashboard's launch queue, GRPO_LAB_MAX_RUNS at once):

    grpo        P prompts x G responses (the default demo)
    ppo         P prompts x G responses: the same samples per step as GRPO
    ppo-1       P prompts x 1 response:  the same prompts per step, PPO's usual form

    .venv/bin/python bench/bench_ppo_vs_grpo.py                          # 5 seeds x 200 steps, 32 prompts, G = 8
    .venv/bin/python bench/bench_ppo_vs_grpo.py --seeds 3 --max-steps 50
    .venv/bin/python bench/bench_ppo_vs_grpo.py --runs-dir /tmp/pvg --reuse   # report an existing sweep again

The runs stay in --runs-dir (default /tmp/bench-ppo-vs-grpo): the dashboard's Compare page opens
them with ?sweep=ppo-vs-grpo. Per variant: n seeds, mean and 95% t-interval over seeds of the final
reward (`reward/mean` of the last step: the sampled policy's accuracy, not a greedy evaluation), the
best step, the reward AUC (mean over steps), the final KL, the IQM of the final reward; the median
seconds per step; then each PPO variant against GRPO with Welch's interval and a plain verdict. All
statistics are grpo_lab/rundir/variants.py's (bench/sweep_stats.py). Cost per run, from status.json:
trained parameters, peak memory, and the training state those parameters need (float32 weights,
gradients and AdamW's two moments: 16 bytes each), which is what the value model adds. Runs train with --stop-on none: the run doctor would stop most
PPO runs when their logged k3 KL (not in PPO's loss) explodes, and they would be compared at an
earlier step than the others.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import sweep_stats  # noqa: E402
from grpo_lab.rundir.layout import RunPaths, read_json  # noqa: E402

SWEEP = "ppo-vs-grpo"


def plans(group_size: int) -> dict[str, dict]:
    return {"grpo": {"algo": "grpo", "group_size": group_size}, "ppo": {"algo": "ppo", "group_size": group_size},
            "ppo-1": {"algo": "ppo", "group_size": 1}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 per variant (default 5)")
    parser.add_argument("--max-steps", type=int, default=200, help="training steps per run (default 200)")
    parser.add_argument("--prompts-per-step", type=int, default=32)
    parser.add_argument("--group-size", type=int, default=8, help="G for grpo and ppo; ppo-1 uses 1")
    parser.add_argument("--only", default="grpo,ppo,ppo-1", help="variants, comma-separated; the first is the "
                        "baseline of the differences")
    parser.add_argument("--runs-dir", type=Path, default=Path("/tmp/bench-ppo-vs-grpo"))
    parser.add_argument("--reuse", action="store_true", help="report from the sweep in --runs-dir, train nothing")
    parser.add_argument("--retrain-unfinished", action="store_true", help="keep the sweep's finished runs in "
                        "--runs-dir, train the others again from the start")
    parser.add_argument("--max-runs", type=int, default=2, help="runs training at once (GRPO_LAB_MAX_RUNS)")
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of every run (default 1: "
                        "several runs share the cores)")
    parser.add_argument("--json", type=Path, help="also write the per-run figures to this file")
    parser.add_argument("extra", nargs="*", help="further trainer flags after --, e.g. -- --lr 1e-3")
    args = parser.parse_args()
    all_plans = plans(args.group_size)
    names = [v.strip() for v in args.only.split(",") if v.strip()]
    if bad := [v for v in names if v not in all_plans]:
        parser.error(f"--only: unknown variant {bad[0]!r}; one of {', '.join(all_plans)}")

    # stop_on none: the run doctor's kl_explosion watches kl/mean (k3), which PPO's loss does not hold
    # down (grpo_lab/trainer/ppo.py); a run it stopped would be compared at an earlier step
    base = {"max_steps": args.max_steps, "prompts_per_step": args.prompts_per_step, "logging": "scalars",
            "checkpoint_every": args.max_steps + 1, "stop_on": "none", **trainer_flags(args.extra)}
    runs = sweep_stats.plan_variants(SWEEP, base, {v: all_plans[v] for v in names}, list(range(args.seeds)))
    if not args.reuse:
        sweep_stats.launch_and_wait(runs, args.runs_dir, args.max_runs, args.threads, args.retrain_unfinished)

    # seconds per step: the median, robust to the first step's warm-up and to other jobs' bursts
    text, table = sweep_stats.report(args.runs_dir, runs, [("s/step", lambda df: df["time/step_s"].median())],
                                     digits={"s/step": 3})
    status = {r.name: read_json(RunPaths(args.runs_dir / r.name).status) or {} for r in runs}
    print(f"\n{args.max_steps} steps, seeds 0-{args.seeds - 1}, built-in task, {args.prompts_per_step} prompts a step; "
          f"final reward = reward/mean of the last step; 95% t-intervals over seeds (grpo_lab/rundir/variants.py); "
          f"runs in {args.runs_dir} (Compare: ?sweep={SWEEP})\n")
    print(text)
    print("\n| variant | samples/step | trained params | train state MB | peak MB (mean over seeds) |\n|---|---|---|---|---|")
    for v in names:
        rs = [r for r in runs if r.variant == v]
        params = int(status[rs[0].name].get("trained_params", 0))
        peak = sum(float(status[r.name].get("peak_memory_mb", 0)) for r in rs) / len(rs)
        print(f"| {v} | {args.prompts_per_step * all_plans[v]['group_size']} | {params:,} | "
              f"{params * 16 / 2**20:.1f} | {peak:.0f} |")
    if args.json:
        args.json.write_text(json.dumps({"max_steps": args.max_steps, "seeds": args.seeds,
                                         "runs": table.to_dict("records")}, indent=1))


def trainer_flags(extra: list[str]) -> dict:
    """Trainer flags after -- as option values (the trainer's own parser, as grpo-lab-sweep reads them)."""
    from grpo_lab.launching import sweep
    try:
        return sweep.base_values(extra) if extra else {}
    except sweep.SweepError as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
