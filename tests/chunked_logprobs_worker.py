"""A program tests/trainer/test_chunked_logprobs.py runs under torchrun: chunked log-probs under DDP and FSDP.

    torchrun --nproc-per-node 2 tests/chunked_logprobs_worker.py OUT.json

For each strategy, each rank takes its half of one fixed batch, computes token_logprobs with chunks of
a few tokens asked for, and backpropagates its share of a token-averaged loss through the wrapped
model; rank 0 then computes the same loss over the whole batch on one plain copy, from the whole
logits, and writes how far the log-probs and the averaged gradients are from it, and whether the
chunked path ran (DDP: it must; FSDP: it must not, the head's weight being sharded).
"""

from __future__ import annotations

import dataclasses
import json
import sys

import torch

from grpo_lab.trainer import rollout as rollout_module
from grpo_lab.trainer import tiny
from grpo_lab.trainer.config import Config
from grpo_lab.trainer.decode import Sampling
from grpo_lab.trainer.distributed import Dist, launch, wrap
from grpo_lab.trainer.rollout import sample, token_logprobs
from model_helpers import lively

TEMPERATURE = 1.3


def full_grads(model) -> dict[str, torch.Tensor]:
    out = {}
    for name, p in model.named_parameters():
        g = p.grad
        out[name.removeprefix("module.")] = g.full_tensor() if hasattr(g, "full_tensor") else g
    return out


def check(d: Dist, chunk_bytes: float) -> dict:
    tokenizer = tiny.build_tokenizer()
    torch.manual_seed(0)  # the same rollout on every rank
    rollout = sample(lively(tiny.build_model(tokenizer, seed=0)), tokenizer, ["1+2=", "13+4=", "5*6=", "7-1="], Sampling(2, 6, 1.3),
                     torch.device("cpu"))
    mask = rollout.completion_mask.float()
    total = float(mask.sum())
    rows = torch.arange(d.rank, len(mask), d.world_size)
    model = wrap(d, lively(tiny.build_model(tokenizer, seed=0)))
    calls = []
    real = rollout_module.head_logprobs
    rollout_module.head_logprobs = lambda *a, **k: calls.append(1) or real(*a, **k)
    try:
        logp, _ = token_logprobs(model, rollout.select(rows), TEMPERATURE, chunk_bytes=chunk_bytes)
    finally:
        rollout_module.head_logprobs = real
    # DDP and FSDP average the ranks' gradients: world_size x this rank's share of the token sum
    (d.world_size * (logp * mask[rows]).sum() / total).backward()
    grads = full_grads(model)
    full = torch.zeros_like(mask)
    full[rows] = logp.detach()
    torch.distributed.all_reduce(full)
    result = {"chunked": bool(calls)}
    if d.rank == 0:
        plain = lively(tiny.build_model(tokenizer, seed=0))
        want, _ = token_logprobs(plain, rollout, TEMPERATURE, chunk_bytes=float("inf"))
        ((want * mask).sum() / total).backward()
        result["logp_diff"] = float((full - want.detach()).abs().max())
        result["grad_rel_diff"] = max(float((grads[n] - p.grad).abs().max() / p.grad.abs().max())
                                      for n, p in plain.named_parameters())
    return result


def main(out: str) -> int:
    d = launch(Config())
    chunk_bytes = 3 * len(tiny.build_tokenizer()) * 4  # chunks of 3 tokens
    results = {s: check(dataclasses.replace(d, strategy=s), chunk_bytes) for s in ("ddp", "fsdp")}
    if d.writer:
        with open(out, "w") as f:
            json.dump(results, f)
    d.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
