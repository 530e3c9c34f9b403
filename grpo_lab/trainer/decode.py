"""The sampling loop: each prompt run once, its G completions decoded from one shared cache.

Why not `model.generate` (measured on SmolLM2-135M, 4 prompts x G = 4, 2 CPU cores; bench/bench_generation.py):
- the G completions of a prompt share it: the prompt is run once and its keys and values copied G
  times, where generate runs it G times;
- a completion that has ended leaves the batch: the others decode at the width still running;
- a token is drawn by inverse CDF, one uniform number per row; torch.multinomial (what generate
  calls) draws an exponential per vocabulary entry: 20 ms a token for 16 x 49k, a tenth of a decode step;
- on a CPU, big linear layers multiply their few rows transposed (few_row_linears).
What is drawn is exactly softmax(logits / temperature): no top-k, top-p or repetition penalty from
the model's generation config, so the ratio's denominator pi_old is the distribution sampled.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist

# Up to this many rows, a CPU linear layer of at least BIG_LAYER weights computes (W @ x.T).T instead of x @ W.T.
FEW_ROWS = 16
BIG_LAYER = 1 << 16


@dataclass(frozen=True)
class Sampling:
    """How completions are drawn: the options that travel together from the config to the loop."""

    copies: int  # completions per prompt (G; 1 for evaluation)
    max_new_tokens: int
    temperature: float = 1.0
    greedy: bool = False  # the most likely token each time (evaluation), instead of sampling at `temperature`
    synced: bool = False  # the weights are sharded over processes (FSDP): every row decodes until all are done


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that skip left padding, as generation uses them."""
    pos = attention_mask.long().cumsum(dim=-1) - 1
    return pos.clamp(min=0)


def draw(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """One token per row (B,) from softmax(logits / temperature) (B, V): the first token whose
    cumulative probability passes a uniform number. right=True never picks a token of probability 0.

    >>> _ = torch.manual_seed(0)
    >>> draw(torch.tensor([[0.0, -1e9, 0.0]] * 1000), 1.0).bincount().tolist()
    [500, 0, 500]
    """
    # the running sum in float64: in float32 the 49k-term sum drifts by ~1e-5 of probability mass
    exact = torch.float64 if logits.device.type in ("cpu", "cuda") else torch.float32
    cdf = torch.softmax(logits.float() / temperature, dim=-1).to(exact).cumsum(dim=-1)
    u = torch.rand(cdf.shape[0], 1, dtype=exact, device=cdf.device) * cdf[:, -1:]
    return torch.searchsorted(cdf, u, right=True).squeeze(1).clamp_(max=cdf.shape[1] - 1)


def _few_rows_linear(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    rows = x.numel() // x.shape[-1]
    if rows > FEW_ROWS:
        return torch.nn.functional.linear(x, self.weight, self.bias)
    out = (self.weight @ x.reshape(rows, -1).t()).t().contiguous().view(*x.shape[:-1], -1)
    return out if self.bias is None else out + self.bias


@contextmanager
def few_row_linears(model: torch.nn.Module, on: bool = True) -> Iterator[None]:
    """While decoding on a CPU, plain linear layers multiply their few rows as (W @ x.T).T.

    The same product; MKL's x @ W.T with 1-16 rows runs far below the memory bandwidth on the
    2-core AMD machines this was measured on: SmolLM2's 210 decoder linears took 101 ms a token for
    16 rows, 69 ms transposed; its 49k-word LM head 34 ms, 20 ms transposed. Small layers (the tiny
    model's 64 x 128) lose more to the transposed copy than they gain, and are left as they are, as
    are subclasses of nn.Linear (quantised layers) and layers with a forward of their own (hooks).
    """
    linears = [m for m in model.modules() if type(m) is torch.nn.Linear and "forward" not in vars(m)
               and m.weight.numel() >= BIG_LAYER] if on else []
    for m in linears:
        m.forward = types.MethodType(_few_rows_linear, m)
    try:
        yield
    finally:
        for m in linears:
            del m.forward  # back to nn.Linear.forward


@torch.no_grad()
def decode(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, how: Sampling, eos_id: int,
           pad_id: int) -> torch.Tensor:
    """Completion tokens (N * copies, T) for N left-padded prompts (N, P): prompt i's copies are rows
    i*copies .. i*copies+copies-1; pad_id after a row's EOS; T the longest completion (<= max_new_tokens).

    With `how.synced` several processes share the weights (FSDP) and must run the same forwards:
    every row decodes until every process is done.
    """
    copies, max_new_tokens, temperature, greedy, synced = (how.copies, how.max_new_tokens, how.temperature,
                                                           how.greedy, how.synced)
    # FSDP swaps the weights in and out around each forward: left alone
    with few_row_linears(model, on=input_ids.device.type == "cpu" and not synced):
        out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids(attention_mask),
                    use_cache=True, logits_to_keep=1)
        cache = out.past_key_values
        cache.batch_repeat_interleave(copies)
        logits = out.logits[:, -1].repeat_interleave(copies, dim=0)
        mask = attention_mask.repeat_interleave(copies, dim=0)
        pos = position_ids(mask)[:, -1]
        tokens = torch.full((mask.shape[0], max_new_tokens), pad_id, dtype=torch.long, device=input_ids.device)
        rows = torch.arange(mask.shape[0], device=input_ids.device)  # batch rows still in the cache, in its order
        ended = torch.zeros_like(rows, dtype=torch.bool)  # of those, the ones past their EOS
        for t in range(max_new_tokens):
            token = (logits.argmax(dim=-1) if greedy else draw(logits, temperature)).masked_fill(ended, pad_id)
            tokens[rows, t] = token
            ended |= token == eos_id
            if t + 1 == max_new_tokens:
                break
            going = (~ended).sum()
            if synced:
                dist.all_reduce(going)  # every process runs the same forwards, so all stop at once
            if going == 0:
                return tokens[:, :t + 1]
            # ended rows leave the batch when at most half of it is still going: a CPU GEMM runs rows in
            # blocks of 8 (one row fewer saves nothing) and each drop copies the cache
            if not synced and going <= len(rows) // 2:
                keep = (~ended).nonzero().squeeze(1)
                rows, token, mask, pos, ended = rows[keep], token[keep], mask[keep], pos[keep], ended[keep]
                cache.batch_select_indices(keep)
            mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
            pos = pos + 1
            logits = model(input_ids=token[:, None], attention_mask=mask, position_ids=pos[:, None],
                           past_key_values=cache, use_cache=True).logits[:, -1]
        return tokens
