"""Generation speed: the trainer's sampling loop (trainer/decode.py) against Hugging Face `generate`,
on SmolLM2-135M and the built-in tiny model.

    .venv/bin/python bench/bench_generation.py                       # both models, 3 rounds
    .venv/bin/python bench/bench_generation.py --models smollm2 --rounds 5 --compile

Variants, each sampling G completions of the same prompts at temperature 1 from the full softmax:
  trainer         rollout.sample: each prompt run once, ended rows leave the batch, inverse-CDF
                  draws, few-row linear layers as (W @ x.T).T on a CPU
  plain-linears   the same loop with every linear layer's own product (decode.FEW_ROWS = 0)
  generate        model.generate with a DynamicCache (what the trainer called until it had its loop)
  generate-static cache_implementation="static": one pre-allocated cache of prompt + max_new_tokens
  compiled        (--compile) static cache with decoding compiled by torch.compile (transformers only
                  compiles on accelerators unless told to: CompileConfig(_compile_all_devices=True));
                  its first call, which compiles, is reported apart
Rounds alternate the variants so a busy machine slows each alike; round r seeds every variant
alike. Figures: median seconds per call, completion tokens per second (completions differ).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def generate_variants(compile_too: bool) -> dict[str, dict]:
    out = {"generate": {}, "generate-static": {"cache_implementation": "static"}}
    if compile_too:
        from transformers import CompileConfig

        config = CompileConfig(fullgraph=False, dynamic=False)
        config._compile_all_devices = True  # noqa: SLF001 - the switch transformers offers for CPUs
        out["compiled"] = {"cache_implementation": "static", "compile_config": config}
    return out


def with_generate(model, tokenizer, texts: list[str], group: int, max_new_tokens: int, **extra) -> int:
    """Completion tokens (up to and including EOS) of one `generate` call sampling as the trainer does."""
    enc = tokenizer([t for t in texts for _ in range(group)], return_tensors="pt", padding=True,
                    add_special_tokens=False)
    out = model.generate(**enc, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=max_new_tokens,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, **extra)
    is_eos = out[:, enc["input_ids"].shape[1]:] == tokenizer.eos_token_id
    return int((~((is_eos.long().cumsum(dim=1) - is_eos.long()) > 0)).sum())


def with_trainer(model, tokenizer, texts: list[str], group: int, max_new_tokens: int, few_rows: int) -> int:
    import torch

    from grpo_lab.trainer import decode
    from grpo_lab.trainer.decode import Sampling
    from grpo_lab.trainer.rollout import sample

    kept, decode.FEW_ROWS = decode.FEW_ROWS, few_rows
    try:
        return int(sample(model, tokenizer, texts, Sampling(group, max_new_tokens), torch.device("cpu")).lengths.sum())
    finally:
        decode.FEW_ROWS = kept


def time_model(name: str, rounds: int, prompts: int, group: int, max_new_tokens: int, compile_too: bool) -> None:
    import torch

    from grpo_lab.trainer import decode
    from grpo_lab.trainer.models import load_policy
    from grpo_lab.trainer.tasks import word_problems

    model, tokenizer, builtin = load_policy(name, 0, torch.device("cpu"))
    rows = word_problems().rows[:prompts] if not builtin else None
    texts = [r["prompt"] for r in rows] if rows else [f"{a}+{b}=" for a, b in ((1, 2), (3, 4), (5, 1), (2, 2))][:prompts]
    calls = {"trainer": lambda: with_trainer(model, tokenizer, texts, group, max_new_tokens, decode.FEW_ROWS),
             "plain-linears": lambda: with_trainer(model, tokenizer, texts, group, max_new_tokens, 0)}
    for key, extra in generate_variants(compile_too).items():
        calls[key] = lambda extra=extra: with_generate(model, tokenizer, texts, group, max_new_tokens, **extra)
    seconds: dict[str, list[float]] = {k: [] for k in calls}
    tokens: dict[str, list[int]] = {k: [] for k in calls}
    first: dict[str, float] = {}
    with torch.no_grad():
        for r in range(rounds + 1):  # round 0 warms up (and compiles), not counted
            for key, call in calls.items():
                torch.manual_seed(r)
                start = time.perf_counter()
                n = call()
                elapsed = time.perf_counter() - start
                print(f"  {name} round {r} {key}: {elapsed:.2f} s, {n} tokens", file=sys.stderr, flush=True)
                if r == 0:
                    first[key] = elapsed
                    continue
                seconds[key].append(elapsed)
                tokens[key].append(n)
    params = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"\n{name}: {params:.1f} M parameters, {len(texts)} prompts x G={group}, {max_new_tokens} new tokens, "
          f"{rounds} rounds, torch threads {torch.get_num_threads()}")
    print(f"{'variant':<16}{'s/call':>10}{'tokens/s':>12}{'vs generate':>13}{'first call s':>14}")
    base = sum(tokens["generate"]) / sum(seconds["generate"])
    for key in seconds:
        tps = sum(tokens[key]) / sum(seconds[key])
        print(f"{key:<16}{statistics.median(seconds[key]):>10.3f}{tps:>12.1f}{tps / base:>12.2f}x{first[key]:>14.2f}")


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
