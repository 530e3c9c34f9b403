"""Generation speed: Hugging Face `generate` options the trainer could use, on the trainer's own
sampling call (trainer.rollout.sample), for SmolLM2-135M and the built-in tiny model.

    .venv/bin/python bench/bench_generation.py                       # both models, 3 rounds
    .venv/bin/python bench/bench_generation.py --models smollm2 --rounds 5 --compile

Variants (each is `sample` with extra keyword arguments for `generate`):
  dynamic   today's call: DynamicCache grown token by token
  static    cache_implementation="static": one pre-allocated cache of prompt + max_new_tokens
  compiled  (--compile) static cache with decoding compiled by torch.compile (transformers only
            compiles on accelerators unless told to: CompileConfig(_compile_all_devices=True));
            its first call, which compiles, is reported apart
Batch order by prompt length changes nothing here: a step samples all its completions in one
`generate` call, padded to the longest prompt, so there is no batch to reorder.
Rounds alternate the variants so a busy machine slows each alike; the same seed gives each
variant the same prompts. Figures: median seconds per call, completion tokens per second.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def variants(compile_too: bool) -> dict[str, dict]:
    out = {"dynamic": {}, "static": {"cache_implementation": "static"}}
    if compile_too:
        from transformers import CompileConfig

        config = CompileConfig(fullgraph=False, dynamic=False)
        config._compile_all_devices = True  # noqa: SLF001 - the switch transformers offers for CPUs
        out["compiled"] = {"cache_implementation": "static", "compile_config": config}
    return out


def time_model(name: str, rounds: int, prompts: int, group: int, max_new_tokens: int, compile_too: bool) -> None:
    import torch

    from grpo_lab.trainer.models import load_policy
    from grpo_lab.trainer.rollout import sample
    from grpo_lab.trainer.tasks import word_problems

    model, tokenizer, builtin = load_policy(name, 0, torch.device("cpu"))
    rows = word_problems().rows[:prompts] if not builtin else None
    texts = [r["prompt"] for r in rows] if rows else [f"{a}+{b}=" for a, b in ((1, 2), (3, 4), (5, 1), (2, 2))][:prompts]
    generate = model.generate
    seconds: dict[str, list[float]] = {k: [] for k in variants(compile_too)}
    tokens: dict[str, list[int]] = {k: [] for k in seconds}
    first: dict[str, float] = {}
    for r in range(rounds + 1):  # round 0 warms up (and compiles), not counted
        for key, extra in variants(compile_too).items():
            model.generate = functools.partial(generate, **extra)
            torch.manual_seed(r)
            start = time.perf_counter()
            rollout = sample(model, tokenizer, texts, group, max_new_tokens, 1.0, torch.device("cpu"))
            elapsed = time.perf_counter() - start
            print(f"  {name} round {r} {key}: {elapsed:.2f} s", file=sys.stderr, flush=True)
            if r == 0:
                first[key] = elapsed
                continue
            seconds[key].append(elapsed)
            tokens[key].append(int(rollout.completion_mask.sum()))
    model.generate = generate
    params = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"\n{name}: {params:.1f} M parameters, {len(texts)} prompts x G={group}, {max_new_tokens} new tokens, "
          f"{rounds} rounds, torch threads {torch.get_num_threads()}")
    print(f"{'variant':<10}{'s/call':>10}{'tokens/s':>12}{'vs dynamic':>12}{'first call s':>14}")
    base = statistics.median(seconds["dynamic"])
    for key in seconds:
        s = statistics.median(seconds[key])
        tps = sum(tokens[key]) / sum(seconds[key])
        print(f"{key:<10}{s:>10.3f}{tps:>12.1f}{s / base:>12.2f}{first[key]:>14.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["smollm2", "tiny"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--compile", action="store_true", help="also time compiled decoding (slow to compile)")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    for name in args.models:
        time_model(name, args.rounds, args.prompts, args.group_size, args.max_new_tokens, args.compile)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
