"""Benchmark: GRPO variants on the SmolLM2 word-problem recipe, at one compute budget.

Each variant trains grpo_lab/configs/smollm2-word-problems.yaml with the same seed until it has sampled the
same number of completions (default 640: the recipe's 40 steps x 4 prompts x G = 4). The budget
counts sampled completions, not steps, because dynamic sampling pays for the groups it drops: it
makes fewer updates from the same sampling. Then every held-out prompt (20 % of the task, 37
prompts) is answered greedily, before and after training. One row per run:

    variant, seed, held-out accuracy start -> end, groups/frac_zero_std (mean, first 5 steps ->
    last 5), sampled reward and truncated share (first 5 -> last 5 steps), updates, completions
    sampled / trained on, sampling rounds, wall seconds

Each run is its own process (one model in memory at a time), calling the trainer's own set-up,
`grpo_step` and evaluation. Needs the offline model (make smollm2).

    .venv/bin/python bench/bench_variants.py                                  # chapter, dynamic, mask_truncated; seed 1
    .venv/bin/python bench/bench_variants.py --seeds 0 1 --budget 320 --variants chapter,dynamic
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RECIPE = ROOT / "grpo_lab" / "configs" / "smollm2-word-problems.yaml"
# Each variant: trainer options on top of the recipe. With the recipe's one pass per batch every
# ratio is 1, so GSPO's sequence ratio and clip-higher change nothing here (not offered).
VARIANTS = {
    "chapter": {},
    "dynamic": {"dynamic_sampling": True, "dynamic_sampling_rounds": 4},
    "mask_truncated": {"mask_truncated": True},
    "mask_truncated_dynamic": {"mask_truncated": True, "dynamic_sampling": True, "dynamic_sampling_rounds": 4},
    "dr_grpo": {"std_mode": "none", "loss_aggregation": "constant"},
    "batch_std": {"std_mode": "batch"},
}
NOT_A_STEP_BOUND = 100_000  # the budget stops the loop, not max_steps


def one_run(variant: str, seed: int, budget: int, runs: str) -> dict:
    """Train one variant to the budget in this process; returns its figures."""
    from grpo_lab.trainer.config import from_dict, read_config_file
    from grpo_lab.trainer.distributed import Dist
    from grpo_lab.trainer.evaluate import evaluate
    from grpo_lab.trainer.grpo import grpo_step
    from grpo_lab.trainer.run import prepare

    values = {**read_config_file(str(RECIPE)), **VARIANTS[variant]}
    cfg = from_dict({**values, "seed": seed, "runs_dir": runs, "name": f"{variant}-s{seed}", "logging": "scalars",
                     "eval_every": 0, "eval_prompts": 0, "max_steps": NOT_A_STEP_BOUND})
    comps, _, status, step = prepare(cfg, Dist())  # one process
    start_eval = evaluate(comps)
    G = cfg.group_size
    sampled = trained = 0
    steps = []
    start = time.time()
    while sampled < budget:
        m = grpo_step(comps, step)
        sampled += int(m["groups/kept"] + m["groups/dropped"]) * G
        trained += int(m["groups/kept"]) * G
        steps.append({k: m.get(k) for k in ("groups/frac_zero_std", "groups/sampling_rounds", "groups/kept",
                                            "reward/mean", "time/step_s", "completion/length_mean",
                                            "completion/truncated_frac")})
        print(f"{variant} s{seed} step {step}: {sampled}/{budget} sampled, frac_zero_std "
              f"{m['groups/frac_zero_std']:.2f}, rounds {m['groups/sampling_rounds']:.0f}, "
              f"reward {m['reward/mean']:.2f}, {m['time/step_s']:.1f} s", file=sys.stderr, flush=True)
        step += 1
    wall = time.time() - start
    end_eval = evaluate(comps)
    comps.writer.close()
    status.update(state="finished", step=step - 1)
    return {"variant": variant, "seed": seed, "budget": budget, "updates": sum(1 for s in steps if s["groups/kept"]),
            "steps": len(steps), "sampled": sampled, "trained": trained, "wall_s": wall,
            "acc_start": start_eval["eval/accuracy"], "acc_end": end_eval["eval/accuracy"],
            "eval_prompts": int(end_eval["eval/prompts"]), "per_step": steps}


def mean(values: list[float]) -> float:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else float("nan")


def row(r: dict) -> str:
    zero = [s["groups/frac_zero_std"] for s in r["per_step"]]
    rounds = [s["groups/sampling_rounds"] for s in r["per_step"]]
    reward = [s["reward/mean"] for s in r["per_step"]]
    cut = [s["completion/truncated_frac"] for s in r["per_step"]]
    return (f"| {r['variant']} | {r['seed']} | {r['acc_start']:.3f} → {r['acc_end']:.3f} | "
            f"{mean(zero):.2f} ({mean(zero[:5]):.2f} → {mean(zero[-5:]):.2f}) | "
            f"{mean(reward[:5]):.2f} → {mean(reward[-5:]):.2f} | {mean(cut[:5]):.2f} → {mean(cut[-5:]):.2f} | "
            f"{r['updates']} | "
            f"{r['sampled']} / {r['trained']} | {mean(rounds):.2f} (max {max(rounds):.0f}) | {r['wall_s']:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--budget", type=int, default=640, help="sampled completions per run (default 640)")
    parser.add_argument("--variants", default="chapter,dynamic,mask_truncated",
                        help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--json", type=Path, help="also write every run's figures, per step, to this file")
    parser.add_argument("--threads", type=int, help="OMP_NUM_THREADS of every run (default: torch's own); on a "
                        "machine shared with other jobs 1 can be twice as fast as 2")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one variant, print its JSON
    args = parser.parse_args()
    if args.one:
        with tempfile.TemporaryDirectory() as runs:
            print("RESULT " + json.dumps(one_run(args.one, args.seeds[0], args.budget, runs)))
        return
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant {unknown[0]!r}; one of {', '.join(VARIANTS)}")
    results = []
    for seed in args.seeds:
        for variant in names:
            began = time.time()
            done = subprocess.run([sys.executable, __file__, "--one", variant, "--seeds", str(seed),
                                   "--budget", str(args.budget)], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                                  env={**os.environ, "PYTHONPATH": str(ROOT),  # its log goes to our stderr
                                       **({"OMP_NUM_THREADS": str(args.threads)} if args.threads else {})})
            line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if done.returncode != 0 or line is None:
                sys.exit(f"{variant} seed {seed} failed (its log is above)")
            results.append(json.loads(line.removeprefix("RESULT ")))
            print(f"{variant} seed {seed}: done in {time.time() - began:.0f} s (process, with model load and "
                  f"two evaluations)\n{row(results[-1])}", flush=True)
            if args.json:  # after every run: a long benchmark interrupted keeps what it measured
                args.json.write_text(json.dumps(results, indent=1))
    print(f"\nbudget {args.budget} sampled completions per run; held-out accuracy over "
          f"{results[0]['eval_prompts']} prompts, greedy (one prompt = {1 / results[0]['eval_prompts']:.3f})\n")
    print("| variant | seed | held-out accuracy start → end | groups/frac_zero_std mean (first 5 → last 5 steps) "
          "| sampled reward first 5 → last 5 steps | truncated first 5 → last 5 | updates "
          "| completions sampled / trained | sampling rounds per step | train wall s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(row(r))


if __name__ == "__main__":
    main()
