"""What measuring KL with beta 0 costs (`measure_kl`): seconds per GRPO step on the built-in tiny model, with and
without the option, and the reference model's memory.

    .venv/bin/python bench/bench_kl_on_request.py                  # 20 timed steps a run, 3 runs each
    .venv/bin/python bench/bench_kl_on_request.py --steps 50 --repeats 5 --passes 1

Each run is the same seeded beta 0 run of the demo's settings (logging off, no warm start: the step is what
is timed); runs with and without the option alternate, so a busy machine slows both alike. The first step
of a run is left out (allocator warm-up). The option's cost is the reference's forward once a step
(time/ref_s) and the k3 of each update (no_grad): the step's median with it against without it. The update
itself does not change (tests/trainer/test_kl_on_request.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def timed_run(runs_dir: str, name: str, measure_kl: bool, args: argparse.Namespace) -> tuple[list[float], list[float], int]:
    """(time/step_s of each step after the first, time/ref_s of each, the reference's bytes: 0 without one)."""
    from grpo_lab.trainer.config import from_dict
    from grpo_lab.trainer.grpo import grpo_step
    from grpo_lab.trainer.run import prepare, release

    cfg = from_dict({"beta": 0, "measure_kl": measure_kl, "sft_steps": 0, "logging": "off", "passes": args.passes,
                     "prompts_per_step": args.prompts, "group_size": args.group_size, "device": "cpu",
                     "runs_dir": runs_dir, "name": name})
    comps, _, _, _ = prepare(cfg)
    try:
        steps, refs = [], []
        for step in range(1, args.steps + 2):
            metrics = grpo_step(comps, step).metrics
            metrics.update(comps.timer.scalars())  # time/* per phase, as the run loop adds them
            if step > 1:
                steps.append(metrics["time/step_s"])
                refs.append(metrics["time/ref_s"])
        ref = comps.reference
        size = sum(p.numel() * p.element_size() for p in ref.parameters()) if ref is not None else 0
        return steps, refs, size
    finally:
        release(comps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="timed steps a run (after one untimed)")
    parser.add_argument("--repeats", type=int, default=3, help="runs with and without the option, alternating")
    parser.add_argument("--passes", type=int, default=4, help="trainer default 4")
    parser.add_argument("--prompts", type=int, default=32, help="prompts per step (trainer default 32)")
    parser.add_argument("--group-size", type=int, default=8, help="trainer default 8")
    args = parser.parse_args()

    import torch

    times: dict[bool, list[float]] = {False: [], True: []}
    refs: dict[bool, list[float]] = {False: [], True: []}
    sizes: dict[bool, int] = {}
    with tempfile.TemporaryDirectory(prefix="bench-kl-") as runs_dir:
        for r in range(args.repeats):
            for on in (False, True) if r % 2 == 0 else (True, False):
                steps, ref_s, sizes[on] = timed_run(runs_dir, f"{'on' if on else 'off'}-{r}", on, args)
                times[on] += steps
                refs[on] += ref_s
    off, on = statistics.median(times[False]), statistics.median(times[True])
    print(f"tiny model, CPU, torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}; "
          f"beta 0, G={args.group_size}, {args.prompts} prompts, passes={args.passes}; "
          f"{args.repeats} runs x {args.steps} timed steps each")
    print(f"median s/step without measure_kl: {off:.4f} (time/ref_s {statistics.median(refs[False]):.4f})")
    print(f"median s/step with measure_kl:    {on:.4f} (time/ref_s {statistics.median(refs[True]):.4f})")
    print(f"cost: {on - off:+.4f} s/step ({100 * (on / off - 1):+.1f}%); reference weights in memory: "
          f"{sizes[False] / 1e6:.2f} MB without, {sizes[True] / 1e6:.2f} MB with")


if __name__ == "__main__":
    main()
