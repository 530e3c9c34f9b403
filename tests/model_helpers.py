"""A tiny model whose outputs are worth testing: log-probs far from uniform, gradients not near zero."""

from __future__ import annotations

import torch
from torch import nn

from grpo_lab.trainer.decode import Sampling
from grpo_lab.trainer.rollout import sample


def lively(model: nn.Module, seed: int = 1) -> nn.Module:
    """`model` with its matrices drawn wider (std 0.3, from their own seeded generator), in eval mode.
    The tiny model as built repeats one character to the end; lively, its greedy completions differ from
    prompt to prompt and some end (EOS) early, after different numbers of tokens."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
    return model.eval()


def greedy_endings(model, tokenizer) -> tuple[list[str], list[str]]:
    """Prompts whose greedy completion ends within 24 tokens, and prompts whose completion does not."""
    prompts = [f"{a}+{b}=" for a in range(0, 20, 3) for b in range(0, 9, 4)]
    runs_on = sample(model, tokenizer, prompts, Sampling(1, 24, greedy=True), torch.device("cpu")).truncated.tolist()
    return [p for p, t in zip(prompts, runs_on) if not t], [p for p, t in zip(prompts, runs_on) if t]
