"""Per-token log-probabilities (and entropy) from the last hidden states and the LM head, a chunk of
tokens at a time, forward and backward: the (B, T, V) float32 logits are never held whole.

Why: with a Qwen2.5 vocabulary (151,936) at 16 completions x 512 tokens, the logits alone are 5 GB in
float32, and the old path held them, their log-softmax and both gradients at once (19.3 GB for one
CPU step). Here the forward keeps only what backward needs to rebuild a chunk: the hidden states
(B, T, H), the head's weights and two numbers per token (the log-normaliser and the entropy); backward
recomputes each chunk's logits from them. One more head product per chunk in backward: the price of
not storing them, the same trade as gradient checkpointing (and as TRL's chunked LM head or Liger's
fused losses; this is our own, written from the math below).

The math, per token with logits z = (h W^T + b) / temperature, lse = logsumexp(z), p = softmax(z):
    log p(y)  = z_y - lse                      d/dz = onehot(y) - p
    entropy H = -sum_v p_v log p_v             d/dz = -p * (log p + H)
Shapes: (B, T) completions by completion tokens, H the hidden size, V the vocabulary, N = B * T.

`chunked_head` decides whether a model's logits are its head's product at all (no soft-capping or
scaling after it; a plain nn.Linear; no FSDP): elsewhere rollout.token_logprobs keeps the old path.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from grpo_lab.trainer.models import unwrap

# The most bytes of float32 logits held at once. A (B, T, V) that fits is computed whole, as before
# (small shapes pay nothing: no recompute in backward); a larger one in chunks of tokens this size,
# each needing at most two such buffers at a time. Every chunk reads the head's whole weight again
# (545 MB for Qwen2.5-0.5B's), so small chunks are slow on a CPU. Measured on 2 shared CPU cores,
# 1,024 tokens, hidden 896, vocabulary 151,936, forward then forward + backward, two rounds: chunks of
# 32 MB 46-56 s and 133-166 s; 64 MB 32-49 s and 89-102 s; 128 MB 18-35 s and 60-76 s; 256 MB
# 12-16 s and 43-79 s, for 380 MB more peak memory than 64 MB chunks. 256 MB: 441 tokens of that vocabulary.
# Just past it the recomputed product shows: a 2-layer SmolLM2 shape (vocabulary 49,152), 16 x 128 and
# 16 x 256 tokens, one thread: forward + backward 9% and 7% slower than whole, no-grad forwards the same.
CHUNK_BYTES = 256 * 2**20


def chunk_tokens(vocab: int, chunk_bytes: float) -> int:
    """Tokens per chunk: as many float32 rows of `vocab` logits as fit in `chunk_bytes`, at least one.

    >>> chunk_tokens(151_936, 256 * 2**20)
    441
    >>> chunk_tokens(151_936, 0)
    1
    """
    return max(1, int(chunk_bytes // (vocab * 4)))


def _chunk_logits(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                  temperature: float) -> torch.Tensor:
    """(n, V) float32 logits / temperature for n hidden rows: the head's product in the model's dtype,
    then float32, as the model's own forward and the old path compute them."""
    z = nn.functional.linear(hidden, weight, bias).float()
    return z if temperature == 1.0 else z.div_(temperature)


class _ChunkedHeadLogprobs(torch.autograd.Function):
    """(logp (N,), entropy (N,) or empty) of targets (N,) under softmax((hidden W^T + b) / temperature)."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, temperature, step, with_entropy):
        n = hidden.shape[0]
        logp = hidden.new_empty(n, dtype=torch.float32)
        lse = hidden.new_empty(n, dtype=torch.float32)
        entropy = hidden.new_empty(n if with_entropy else 0, dtype=torch.float32)
        for s in range(0, n, step):
            z = _chunk_logits(hidden[s:s + step], weight, bias, temperature)  # (n, V)
            lse[s:s + step] = torch.logsumexp(z, dim=-1)
            logp[s:s + step] = z.gather(1, targets[s:s + step, None]).squeeze(1) - lse[s:s + step]
            if with_entropy:  # objective.entropy's -sum p log p, as a dot product: no third (n, V) buffer
                logp_all = z.sub_(lse[s:s + step, None])
                entropy[s:s + step] = -torch.linalg.vecdot(logp_all.exp(), logp_all)
        ctx.save_for_backward(hidden, weight, bias, targets, lse, entropy)
        ctx.temperature, ctx.step = temperature, step
        ctx.set_materialize_grads(False)  # an output the loss does not use (a detached entropy): None, no work
        return logp, entropy

    @staticmethod
    def backward(ctx, grad_logp, grad_entropy):
        hidden, weight, bias, targets, lse, entropy = ctx.saved_tensors
        need_hidden, need_weight, need_bias = ctx.needs_input_grad[:3]
        if grad_entropy is not None and not entropy.numel():
            grad_entropy = None
        if grad_logp is None and grad_entropy is None:
            return None, None, None, None, None, None, None
        grad_hidden = torch.empty_like(hidden) if need_hidden else None
        # float32 sums over the chunks: one rounding at the end, as the old path's single product has
        grad_weight = torch.zeros_like(weight, dtype=torch.float32) if need_weight else None
        grad_bias = torch.zeros_like(bias, dtype=torch.float32) if need_bias else None
        step, n = ctx.step, hidden.shape[0]
        for s in range(0, n, step):
            h, y = hidden[s:s + step], targets[s:s + step, None]
            logp_all = _chunk_logits(h, weight, bias, ctx.temperature).sub_(lse[s:s + step, None])  # (n, V)
            # dL/dz = g_logp * (onehot(y) - p) + g_H * (-p * (log p + H)) = -p * coef + g_logp * onehot(y),
            # in place: one (n, V) buffer, two with the entropy's gradient
            if grad_entropy is not None:
                p = logp_all.exp()
                coef = logp_all.add_(entropy[s:s + step, None]).mul_(grad_entropy[s:s + step, None])
                if grad_logp is not None:
                    coef.add_(grad_logp[s:s + step, None])
                grad_z = p.mul_(coef).neg_()
                del coef, logp_all
            else:
                grad_z = logp_all.exp_().mul_(grad_logp[s:s + step, None]).neg_()
            if grad_logp is not None:
                grad_z.scatter_add_(1, y, grad_logp[s:s + step, None])
            if ctx.temperature != 1.0:
                grad_z.div_(ctx.temperature)
            grad_z = grad_z.to(h.dtype)  # the gradient of the model-dtype logits, as .float()'s backward gives
            if need_hidden:
                grad_hidden[s:s + step] = grad_z @ weight
            if need_weight and grad_weight.dtype == h.dtype:
                grad_weight.addmm_(grad_z.t(), h)
            elif need_weight:  # a bfloat16 product, as the old path's, summed in float32
                grad_weight += grad_z.t() @ h
            if need_bias:
                grad_bias += grad_z.sum(dim=0)
        return (grad_hidden, None if grad_weight is None else grad_weight.to(weight.dtype),
                None if grad_bias is None else grad_bias.to(bias.dtype), None, None, None, None)


def head_logprobs(hidden: torch.Tensor, head: nn.Linear, targets: torch.Tensor, temperature: float = 1.0, *,
                  with_entropy: bool = False, entropy_grad: bool = False,
                  chunk_bytes: float | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p(targets) (B, T) and optionally the entropy (B, T), float32, for hidden states (B, T, H)
    under the LM head `head`, the logits divided by `temperature`; never more than `chunk_bytes` of
    float32 logits at once. The same numbers as log_softmax over the whole logits, to float rounding.

    entropy_grad: the entropy keeps its graph (an entropy bonus); otherwise it is a number.
    Gradients reach the hidden states and the head's weight and bias (a weight shared with the input
    embeddings sums both uses, as autograd does for any parameter used twice).
    """
    B, T, H = hidden.shape
    step = chunk_tokens(head.out_features, CHUNK_BYTES if chunk_bytes is None else chunk_bytes)
    logp, entropy = _ChunkedHeadLogprobs.apply(hidden.reshape(B * T, H), head.weight, head.bias,
                                               targets.reshape(B * T), float(temperature), step,
                                               with_entropy or entropy_grad)
    if not (with_entropy or entropy_grad):
        return logp.view(B, T), None
    entropy = entropy.view(B, T)
    return logp.view(B, T), entropy if entropy_grad and torch.is_grad_enabled() else entropy.detach()


# --- which models' logits are their head's product -----------------------------------------------


def _passthrough(_head: nn.Linear, hidden: torch.Tensor) -> torch.Tensor:
    return hidden


@contextmanager
def head_skipped(head: nn.Linear) -> Iterator[None]:
    """While inside, the model's LM head returns its input: the model's `.logits` are the last hidden
    states of the positions it keeps (logits_to_keep applies), through the model's own forward, so
    whatever wraps the model still runs (DDP's one forward per backward, peft's adapters, the
    gradient-checkpointing hook)."""
    head.forward = types.MethodType(_passthrough, head)
    try:
        yield
    finally:
        del head.forward  # back to nn.Linear.forward


_PLAIN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> its head is plain (checked once)


def chunked_head(model: nn.Module, tokens: int, chunk_bytes: float | None = None) -> nn.Linear | None:
    """The model's LM head when `tokens` (B * T) of its logits are to be computed in chunks, else None:
    the whole logits, the old path. None when they fit in `chunk_bytes`, and for models whose logits
    are not exactly their head's product.

    Not exactly the head's product: FSDP2 (the head's weight is a sharded DTensor, gathered only
    inside the model's own forward, so the chunks could not read it whole: FSDP keeps the old path),
    a head that is not a plain nn.Linear (quantised, LoRA-adapted, hooked, a forward of its own), and a
    model whose forward changes its head's output: soft-capping (Gemma 2), a logit scale (Cohere,
    Granite), a vocabulary slice. The last is found by running the model once on two tokens with its
    head returning 7.0 everywhere: a model that hands back anything but those 7.0s does something to
    its logits (a list of config fields would miss the next model that does). Cached per model.
    """
    from torch.distributed.fsdp import FSDPModule  # noqa: PLC0415 - as rollout.py: loaded by then
    from torch.distributed.tensor import DTensor  # noqa: PLC0415

    model = unwrap(model)
    get_head = getattr(model, "get_output_embeddings", None)
    head = get_head() if get_head is not None else None
    budget = CHUNK_BYTES if chunk_bytes is None else chunk_bytes  # read here: a test may lower it for a run
    if head is None or tokens * getattr(head, "out_features", 0) * 4 <= budget:
        return None
    if any(isinstance(m, FSDPModule) for m in model.modules()):
        return None
    if (type(head) is not nn.Linear or "forward" in vars(head) or head._forward_hooks or head._forward_pre_hooks
            or isinstance(head.weight, DTensor)):
        return None
    if model not in _PLAIN:
        _PLAIN[model] = _logits_are_the_heads(model, head)
    return head if _PLAIN[model] else None


def _logits_are_the_heads(model: nn.Module, head: nn.Linear) -> bool:
    def marker(_head, hidden):
        return torch.full((1,), 7.0, dtype=head.weight.dtype, device=hidden.device).expand(
            *hidden.shape[:-1], head.out_features)

    ids = torch.zeros(1, 2, dtype=torch.long, device=head.weight.device)
    head.forward = types.MethodType(marker, head)
    try:
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    finally:
        del head.forward
    return tuple(logits.shape) == (1, 2, head.out_features) and bool((logits == 7.0).all())
