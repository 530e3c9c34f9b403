"""Benchmark: the same global batch on 1 and 2 processes (one thread each), DDP on gloo.

Three runs of the built-in demo with the same seed and options (logging scalars):
  1 process, the global batch (prompts_per_step P);
  1 process, half of it (P / 2): what each of 2 processes computes, the ideal 2-process step;
  2 processes (torchrun --nproc-per-node 2), the global batch.
Reports seconds per step (median of the scalars' time/step_s after a warm-up), completions per
second, and for the 2-process run the time rank 0 spent inside torch.distributed calls during the
steps (gathering the step to rank 0, the stop-flag and loss-denominator all-reduces; this includes
waiting for the slower rank). DDP's gradient all-reduce runs inside backward, overlapped with it,
so it is not in that figure; it is in the overhead, the 2-process step minus the half-batch step.

Usage: .venv/bin/python bench/bench_distributed.py [--steps 30] [--prompts 32] [--group-size 8] [--repeats 1]
With --repeats N the three runs are repeated in turn and each figure is the median over the N.
Internally re-runs itself under torchrun with --worker to time the collectives.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grpo_lab.rundir.layout import RunPaths, visible_parts  # noqa: E402
COLLECTIVES = ("all_reduce", "all_gather", "all_gather_object", "gather_object", "broadcast", "broadcast_object_list",
               "barrier")


def worker(out: str, argv: list[str]) -> int:
    """python -m grpo_lab.trainer ARGV with torch.distributed's calls timed from the first step on."""
    import torch.distributed as dist

    from grpo_lab.trainer import grpo as trainer_grpo
    from grpo_lab.trainer.__main__ import main

    spent = {"seconds": 0.0, "calls": 0}
    depth = [0]

    def timed(fn):
        def call(*args, **kwargs):
            if depth[0]:  # gather_object calls all_gather inside: count the outer call only
                return fn(*args, **kwargs)
            depth[0] += 1
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                spent["seconds"] += time.perf_counter() - start
                spent["calls"] += 1
        return call

    for name in COLLECTIVES:
        setattr(dist, name, timed(getattr(dist, name)))
    real_step = trainer_grpo.grpo_step

    def step(c, s):
        if s == 1:  # set-up (model loading, warm start) is not the steady state
            spent.update(seconds=0.0, calls=0)
        return real_step(c, s)

    trainer_grpo.grpo_step = step
    code = main(argv)
    if os.environ.get("RANK", "0") == "0":
        Path(out).write_text(json.dumps(spent))
    return code


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(runs: str, name: str, prompts: int, args, processes: int) -> dict:
    trainer_args = ["--runs-dir", runs, "--name", name, "--max-steps", str(args.steps), "--prompts-per-step",
                    str(prompts), "--group-size", str(args.group_size), "--logging", "scalars",
                    "--checkpoint-every", str(args.steps), "--seed", "1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    comm = Path(runs) / f"{name}.comm.json"
    if processes == 1:
        cmd = [sys.executable, "-m", "grpo_lab.trainer", *trainer_args]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(processes),
               "--master-port", str(free_port()), __file__, "--worker", str(comm), *trainer_args]
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parts = visible_parts(RunPaths(Path(runs) / name).table("scalars"))
    scalars = pd.concat([pd.read_parquet(p) for p in parts]).sort_values("step")
    steady = scalars[scalars["step"] > 2]
    step_s = statistics.median(steady["time/step_s"])
    out = {"processes": processes, "prompts": prompts, "step_s": step_s,
           "completions_per_s": prompts * args.group_size / step_s,
           "generation_s": statistics.median(steady["time/generation_s"]),
           "update_s": statistics.median(steady["time/update_s"])}
    if comm.is_file():
        spent = json.loads(comm.read_text())
        out["collective_s_per_step"] = spent["seconds"] / args.steps
        out["collective_calls_per_step"] = spent["calls"] / args.steps
    return out


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        sys.exit(worker(sys.argv[2], sys.argv[3:]))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--prompts", type=int, default=32, help="global prompts per step (even)")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    load = [os.getloadavg()[0]]
    trials: dict[str, list[dict]] = {"one": [], "half": [], "two": []}
    with tempfile.TemporaryDirectory() as runs:
        for r in range(args.repeats):
            trials["one"].append(run(runs, f"one-{r}", args.prompts, args, 1))
            trials["half"].append(run(runs, f"half-{r}", args.prompts // 2, args, 1))
            trials["two"].append(run(runs, f"two-{r}", args.prompts, args, 2))
            load.append(os.getloadavg()[0])
    rows = [{k: statistics.median(t[k] for t in ts) for k in ts[0]} for ts in trials.values()]
    one, half, two = rows
    print(f"tiny model, {args.steps} steps, G={args.group_size}, one thread per process, {os.cpu_count()} CPUs; "
          f"median of {args.repeats} run(s) each; 1-minute load average {min(load):.1f}-{max(load):.1f}")
    print(f"{'processes':>9} {'prompts/step':>12} {'s/step':>8} {'completions/s':>13} {'generation s':>12} "
          f"{'update s':>9}")
    for r in rows:
        print(f"{r['processes']:>9} {r['prompts']:>12} {r['step_s']:>8.3f} {r['completions_per_s']:>13.0f} "
              f"{r['generation_s']:>12.3f} {r['update_s']:>9.3f}")
    print(f"speed-up 2 processes vs 1: {one['step_s'] / two['step_s']:.2f}x "
          f"(ideal, each process's half batch alone: {one['step_s'] / half['step_s']:.2f}x)")
    overhead = two["step_s"] - half["step_s"]
    print(f"2-process overhead over the half-batch step: {overhead:.3f} s ({100 * overhead / two['step_s']:.0f}% of "
          f"its step): communication, rank 0's gathering and logging of both halves, waiting for the slower rank")
    print(f"rank 0 inside torch.distributed calls: {two['collective_s_per_step']:.3f} s/step "
          f"({100 * two['collective_s_per_step'] / two['step_s']:.0f}% of the step; "
          f"{two['collective_calls_per_step']:.0f} calls/step; gradient all-reduce inside backward not included)")


if __name__ == "__main__":
    main()
