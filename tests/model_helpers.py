"""A tiny model whose outputs are worth testing: log-probs far from uniform, gradients not near zero."""

from __future__ import annotations

import torch
from torch import nn


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
