"""Peak memory of one GRPO step with a Qwen2.5-sized vocabulary: whole logits against chunked log-probs.

    .venv/bin/python bench/bench_logprob_memory.py                     # 16 x 512 tokens, V 151,936 (~20 GB free)
    .venv/bin/python bench/bench_logprob_memory.py --paths chunked,chunked+checkpointing  # without the old path
    .venv/bin/python bench/bench_logprob_memory.py --rows 8 --tokens 256 --vocab 49152 --hidden 576 --mlp 1536  # quick

The model is a 2-layer Qwen2 made from a config (Qwen2.5-0.5B's widths: hidden 896, MLP 4864, 14 heads,
2 key-value heads, tied embeddings), random weights, float32 on the CPU. The batch is synthetic: 4
prompts of 64 tokens (two left-padded) x G = 4 completions of `--tokens` tokens, some ending early.
Paths: whole (the old one: the whole logits), chunked (rollout.token_logprobs' default: whole too
for logits under chunked_logprobs.CHUNK_BYTES, so small --vocab/--tokens compare nothing), each
also with gradient checkpointing (models.enable_gradient_checkpointing; TRL's default). One step is
the trainer's own code path: pi_old's log-probs and entropy (no grad) and the reference's
(a frozen copy, no grad) through rollout.token_logprobs, then one update: token_logprobs with grad,
objective.grpo_loss (beta 0.04, the chapter's defaults), backward, gradient clipping and the
trainer's AdamW (setup.make_optimizer), whose state is created here, at its first step.

Each path runs in a process of its own (a peak is a process's high-water mark); the figure is the
kernel's peak resident set (ru_maxrss), with the resident set after building the models (weights,
the reference copy) printed beside it, the peak so far after each phase (the phase where it jumps
holds the peak), and each phase's seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# token_logprobs' chunk_bytes (the whole logits, or chunked_logprobs' default) and gradient checkpointing
PATHS = {"whole": (math.inf, False), "chunked": (None, False),
         "whole+checkpointing": (math.inf, True), "chunked+checkpointing": (None, True)}


def rss_mb() -> float:
    """The resident set now (Linux /proc), MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux


def build(args):
    import copy

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from grpo_lab.trainer.rollout import Rollout

    config = Qwen2Config(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.mlp,
                         num_hidden_layers=args.layers, num_attention_heads=14 if args.hidden % 14 == 0 else 8,
                         num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=True)
    torch.manual_seed(0)
    policy = Qwen2ForCausalLM(config).eval()
    reference = copy.deepcopy(policy).eval().requires_grad_(False)  # as setup.py builds it
    prompts, group, prompt_len = args.rows // 4, 4, 64
    gen = torch.Generator().manual_seed(0)
    prompt_ids = torch.randint(0, args.vocab, (prompts, prompt_len), generator=gen)
    prompt_mask = torch.ones_like(prompt_ids)
    prompt_mask[: prompts // 2, :prompt_len // 4] = 0  # two prompts left-padded
    completion = torch.randint(0, args.vocab, (prompts * group, args.tokens), generator=gen)
    lengths = torch.randint(args.tokens // 2, args.tokens + 1, (prompts * group,), generator=gen)
    completion_mask = (torch.arange(args.tokens)[None, :] < lengths[:, None]).long()
    ids = torch.cat([prompt_ids.repeat_interleave(group, dim=0), completion], dim=1)
    mask = torch.cat([prompt_mask.repeat_interleave(group, dim=0), completion_mask], dim=1)
    rollout = Rollout(input_ids=ids, attention_mask=mask, prompt_len=prompt_len, completion_mask=completion_mask,
                      truncated=lengths == args.tokens, completions=[""] * len(ids), generation_s=0.0)
    return policy, reference, rollout


def one_step(args) -> dict:
    """The worker: one GRPO step on `args.path`, its peak and phase times as JSON."""
    import torch

    from grpo_lab.objective.functions import grpo_loss
    from grpo_lab.trainer.config import Config
    from grpo_lab.trainer.models import enable_gradient_checkpointing
    from grpo_lab.trainer.rollout import token_logprobs
    from grpo_lab.trainer.setup import make_optimizer

    policy, reference, rollout = build(args)
    chunk_bytes, checkpointing = PATHS[args.path]
    if checkpointing:
        enable_gradient_checkpointing(policy)
    built = rss_mb()
    cfg = Config(beta=0.04, max_new_tokens=args.tokens)
    optimizer = make_optimizer(cfg, [p for p in policy.parameters() if p.requires_grad])
    mask = rollout.completion_mask
    times, peaks = {}, {}
    last = time.perf_counter()

    def phase(name: str) -> None:  # its seconds, and the peak so far: the phase where it jumps holds it
        nonlocal last
        times[name], peaks[name], last = time.perf_counter() - last, peak_mb(), time.perf_counter()

    with torch.no_grad():
        old_logp, _entropy = token_logprobs(policy, rollout, cfg.temperature, with_entropy=True,
                                            chunk_bytes=chunk_bytes)
        phase("old_logp")
        ref_logp = token_logprobs(reference, rollout, cfg.temperature, chunk_bytes=chunk_bytes)[0]
        phase("ref")
    logp, _ = token_logprobs(policy, rollout, cfg.temperature, chunk_bytes=chunk_bytes)
    advantages = torch.randn(len(mask), generator=torch.Generator().manual_seed(1))
    out = grpo_loss(logp=logp, old_logp=old_logp, ref_logp=ref_logp, advantages=advantages, mask=mask,
                    settings=cfg.loss_settings)
    phase("forward")
    out.loss.backward()
    phase("backward")
    torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    phase("step")
    # what the optimizer step holds whatever the path: policy and reference weights, gradients, AdamW's 2 moments
    params = sum(p.numel() for p in policy.parameters())
    return {"path": args.path, "built_mb": built, "peak_mb": peak_mb(), "loss": float(out.loss),
            "times": times, "peaks": peaks, "state_mb": 5 * 4 * params / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", default="whole,chunked,chunked+checkpointing",
                        help=f"comma-separated, of {', '.join(PATHS)} (whole: the old path)")
    parser.add_argument("--rows", type=int, default=16, help="completions (4 prompts x G = rows / 4)")
    parser.add_argument("--tokens", type=int, default=512, help="completion tokens per row")
    parser.add_argument("--vocab", type=int, default=151_936)
    parser.add_argument("--hidden", type=int, default=896)
    parser.add_argument("--mlp", type=int, default=4864)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--worker", dest="path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.path:
        print(json.dumps(one_step(args)))
        return
    shape = (f"{args.rows} x {args.tokens} tokens, vocabulary {args.vocab:,}, hidden {args.hidden}, "
             f"{args.layers} layers, float32, CPU")
    print(f"one GRPO step (pi_old, reference, one update): {shape}")
    print("| path | peak RSS MB | after building MB | peak after pi_old, ref, forward, backward, optimizer step MB "
          "| seconds of each | loss |")
    print("|---|---|---|---|---|---|")
    state = 0.0
    shape_flags = [f"--{k}={getattr(args, k)}" for k in ("rows", "tokens", "vocab", "hidden", "mlp", "layers")]
    for path in args.paths.split(","):
        proc = subprocess.run([sys.executable, __file__, *shape_flags, "--worker", path], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            print(f"| {path} | failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]} |")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        peaks = ", ".join(f"{v:,.0f}" for v in r["peaks"].values())
        times = ", ".join(f"{v:.1f}" for v in r["times"].values())
        print(f"| {path} | {r['peak_mb']:,.0f} | {r['built_mb']:,.0f} | {peaks} | {times} | {r['loss']:.6f} |",
              flush=True)
        state = r["state_mb"]
    print(f"weights, the reference's, gradients and AdamW's two moments, float32: {state:,.0f} MB, held at the "
          "optimizer step whatever the path (MB here: MiB)")


if __name__ == "__main__":
    main()
