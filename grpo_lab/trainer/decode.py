"""The sampling loop: each prompt run once, its G completions decoded from one shared cache.

Why not `model.generate` (measured on SmolLM2-135M, 4 prompts x G = 4, 2 CPU cores; bench/bench_generation.py):
- the G completions of a prompt share it: the prompt is run once and its keys and values copied G
  times, where generate runs it G times;
- a token is drawn by inverse CDF, one uniform number per row; torch.multinomial (what generate
  calls) draws an exponential per vocabulary entry: 20 ms a token for 16 x 49k, a tenth of a decode step;
- on a CPU, big linear layers multiply their few rows transposed (few_row_linears).
What is drawn is exactly softmax(logits / temperature): no top-k, top-p or repetition penalty from
the model's generation config, so the ratio's denominator pi_old is the distribution sampled.

Two loops (`Sampling.decode`, the config option `decode`), the same tokens from the same random numbers:
- eager (a CPU's): a dynamic cache; a completion that has ended leaves the batch once half of it has
  (a CPU GEMM runs rows in blocks of 8, so one row fewer saves nothing), the others decode at the
  width still running;
- static (a GPU's): a fixed-width static KV cache of prompt + max_new_tokens (rounded up, so the
  next step reuses it); ended rows stay in the batch, their tokens replaced by padding; whether
  every row has ended is asked every CHECK_EVERY tokens (a host sync), not every token. Its shapes
  never change, so on CUDA ("graphs") the one-token step is compiled with
  torch.compile(mode="reduce-overhead"), which captures it as CUDA graphs, once per model and width,
  and replays it every token of every step after. It needs transformers 5.4.0 or later (a static cache
  layer that keeps its write position, `StaticDecoder.missing`); with an older one the eager loop runs,
  after one warning.
On a CPU the static loop is slower than eager (its attention and mask run over the whole rounded cache,
and no row leaves: CPU time a token, 16 rows x 64 tokens, 7 % more on a 4-layer SmolLM2 shape, 25 % on
the tiny model), so `auto` keeps eager there. With
graphs the first step compiles (tens of seconds, inside that step's time/generation_s); a new width
(evaluation's) or a prompt longer than the cache holds builds another decoder and compiles again.
Both draw one uniform number per row of the full width every token, ended rows included, so the
random stream is the same whichever rows are still running. They agree token for token as long as
no draw lands within float rounding of a boundary between two tokens (the static cache's attention
sums over masked slots too, which can move the last bit of a logit); the test compares them on
tiny models, greedy and sampled.

Each drawn token comes with its log-probability under the distribution it was drawn from,
log softmax(logits / temperature) in float32 (for greedy decoding, at the Sampling's temperature,
1 unless set: the distribution whose most likely token was taken). The training forward recomputes
pi_old anyway (rollout.py); this is the sampler's own figure, for comparing the two.
"""

from __future__ import annotations

import functools
import types
import warnings
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist

from grpo_lab.trainer.config import DECODE_MODES

# Up to this many rows, a CPU linear layer of at least BIG_LAYER weights computes (W @ x.T).T instead of x @ W.T.
FEW_ROWS = 16
BIG_LAYER = 1 << 16
CHECK_EVERY = 16  # static loop: tokens between checks that every row has ended (each a host sync)
CACHE_STEP = 256  # static cache length: prompt + max_new_tokens rounded up to this, so most steps reuse one


@dataclass(frozen=True)
class Sampling:
    """How completions are drawn: the options that travel together from the config to the loop."""

    copies: int  # completions per prompt (G; 1 for evaluation)
    max_new_tokens: int
    temperature: float = 1.0
    greedy: bool = False  # the most likely token each time (evaluation), instead of sampling at `temperature`
    synced: bool = False  # the weights are sharded over processes (FSDP): every row decodes until all are done
    decode: str = "auto"  # which loop: auto, eager, static or graphs (config option `decode`; `loop_for`)


@dataclass
class Decoded:
    """What a decode returns: rows i*copies .. i*copies+copies-1 answer prompt i."""

    tokens: torch.Tensor  # (B, T) long; pad_id after a row's EOS; T the longest completion
    logp: torch.Tensor  # (B, T) float32: each token's log-prob under the distribution it was drawn from; 0 after EOS


def loop_for(how: Sampling, device: torch.device) -> str:
    """The loop that runs: eager, static or graphs. auto: graphs on CUDA, eager elsewhere. Graphs
    only on CUDA (elsewhere static). With the weights sharded (FSDP, `synced`) every forward
    gathers weights from the other processes, which a CUDA graph cannot hold: auto is eager, graphs static.

    >>> loop_for(Sampling(2, 8), torch.device("cpu")), loop_for(Sampling(2, 8), torch.device("cuda"))
    ('eager', 'graphs')
    >>> loop_for(Sampling(2, 8, decode="graphs"), torch.device("cpu"))
    'static'
    """
    if how.decode not in DECODE_MODES:
        raise ValueError(f"decode: must be one of {', '.join(DECODE_MODES)}, got {how.decode!r}")
    cuda = device.type == "cuda" and not how.synced
    if how.decode == "auto":
        return "graphs" if cuda else "eager"
    return "static" if how.decode == "graphs" and not cuda else how.decode


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that skip left padding, as generation uses them."""
    pos = attention_mask.long().cumsum(dim=-1) - 1
    return pos.clamp(min=0)


def _exact(device: torch.device) -> torch.dtype:
    """The CDF's dtype. On a CPU float64 (as the loops always drew; cheap there next to the forward).
    On CUDA float32: in float32 the interval of token i is fl(c + p_i) - c with c its running sum <= 1,
    so each token's probability is off by at most half an ulp of 1, 6e-8 absolute: a token of
    probability 1e-4 is drawn with its probability off by at most 0.06 %, one of 1e-7 by up to
    half; the total's drift (~1e-5 over 49k terms) is divided out. Numbers below 6e-8 are sampled
    inexactly either way: float32 logits make them only to about that precision. Float64 would move
    twice the bytes a token (a copy and a scan of 128 x 152k: 0.3 GB, about 0.1 ms on an H100, next to
    a graph-replayed step of a few ms; an estimate, not measured)."""
    return torch.float64 if device.type == "cpu" else torch.float32


def uniforms(width: int, device: torch.device) -> torch.Tensor:
    """One uniform number in [0, 1) per row of the full batch width (B,): what a token of every row costs
    the random stream, whether the row is still running or not."""
    return torch.rand(width, dtype=_exact(device), device=device)


def _inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The first token whose cumulative probability passes u * total; right=True never picks a
    token of probability 0."""
    cdf = probs.to(u.dtype).cumsum(dim=-1)
    return torch.searchsorted(cdf, (u[:, None] * cdf[:, -1:]), right=True).squeeze(1).clamp_(max=cdf.shape[1] - 1)


def draw(logits: torch.Tensor, temperature: float, u: torch.Tensor | None = None) -> torch.Tensor:
    """One token per row (B,) from softmax(logits / temperature) (B, V): the first token whose
    cumulative probability passes a uniform number (u, (B,); drawn here when None).

    >>> _ = torch.manual_seed(0)
    >>> draw(torch.tensor([[0.0, -1e9, 0.0]] * 1000), 1.0).bincount().tolist()
    [500, 0, 500]
    """
    u = uniforms(len(logits), logits.device) if u is None else u
    return _inverse_cdf(torch.softmax(logits.float() / temperature, dim=-1), u)


def next_tokens(logits: torch.Tensor, how: Sampling, u: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's next token (B,) and its float32 log-prob under softmax(logits / temperature) (B,):
    the numbers the training forward's token_logprobs computes (its log_softmax), to float32 rounding.
    Greedy: the argmax (u unused). The log of the drawn token's probability alone, not a log_softmax over
    the vocabulary: a drawn token's probability is far above float32's smallest (1e-38), so its log is as
    exact, and a pass over (B, V) is saved (3 ms a token for 16 x 49k on a CPU).

    >>> logits = torch.tensor([[2.0, 0.0, -1e9]])
    >>> token, logp = next_tokens(logits, Sampling(1, 1, greedy=True), None)
    >>> token.tolist(), round(logp.item(), 4), round(torch.log_softmax(logits, -1)[0, 0].item(), 4)
    ([0], -0.1269, -0.1269)
    """
    probs = torch.softmax(logits.float() / how.temperature, dim=-1)
    token = logits.argmax(dim=-1) if how.greedy else _inverse_cdf(probs, u)
    return token, probs.gather(-1, token[:, None]).squeeze(1).log()


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


def decode(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, how: Sampling, eos_id: int,
           pad_id: int) -> torch.Tensor:
    """The tokens alone of `decode_with_logp` (N * copies, T): what a multi-turn round cuts up."""
    return decode_with_logp(model, input_ids, attention_mask, how, eos_id, pad_id).tokens


@torch.no_grad()
def decode_with_logp(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, how: Sampling, eos_id: int,
                     pad_id: int, check_every: int = CHECK_EVERY) -> Decoded:
    """Completion tokens (N * copies, T) for N left-padded prompts (N, P), and each token's log-prob
    under the distribution it was drawn from: prompt i's copies are rows i*copies .. i*copies+copies-1;
    pad_id (log-prob 0) after a row's EOS; T the longest completion (<= max_new_tokens).

    With `how.synced` several processes share the weights (FSDP) and must run the same forwards:
    every row decodes until every process is done.
    """
    device = input_ids.device
    loop = loop_for(how, device)
    width = input_ids.shape[0] * how.copies
    static = None if loop == "eager" else _static_decoder(model, width, input_ids.shape[1] + how.max_new_tokens,
                                                          graphs=loop == "graphs")
    # FSDP swaps the weights in and out around each forward: left alone
    with few_row_linears(model, on=device.type == "cpu" and not how.synced):
        out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids(attention_mask),
                    use_cache=True, logits_to_keep=1)
        logits = out.logits[:, -1].repeat_interleave(how.copies, dim=0)
        mask = attention_mask.repeat_interleave(how.copies, dim=0)
        if static is None:
            cache = out.past_key_values
            cache.batch_repeat_interleave(how.copies)
            return _eager_loop(model, cache, logits, mask, how, eos_id, pad_id)
        static.load(out.past_key_values, how.copies, mask)
        return _static_loop(model, static, logits, mask, how, eos_id, pad_id, check_every)


def _eager_loop(model, cache, logits, mask, how: Sampling, eos_id: int, pad_id: int) -> Decoded:
    """A dynamic cache; ended rows leave the batch once at most half of it is still going."""
    device, width, synced = mask.device, mask.shape[0], how.synced
    pos = position_ids(mask)[:, -1]
    tokens = torch.full((width, how.max_new_tokens), pad_id, dtype=torch.long, device=device)
    logps = torch.zeros((width, how.max_new_tokens), dtype=torch.float32, device=device)
    rows = None  # the batch rows still in the cache, in its order, once some have left (None: every row)
    ended = torch.zeros(width, dtype=torch.bool, device=device)  # of those, the ones past their EOS
    for t in range(how.max_new_tokens):
        u = None if how.greedy else uniforms(width, device)  # the full width drawn: the static loop's stream
        token, logp = next_tokens(logits, how, u if u is None or rows is None else u[rows])
        token = token.masked_fill(ended, pad_id)
        if rows is None:  # a column write; an indexed one only once rows have left
            tokens[:, t], logps[:, t] = token, logp
        else:
            tokens[rows, t], logps[rows, t] = token, logp
        ended |= token == eos_id
        if t + 1 == how.max_new_tokens:
            break
        going = (~ended).sum()
        if synced:
            dist.all_reduce(going)  # every process runs the same forwards, so all stop at once
        if going == 0:
            return _decoded(tokens[:, :t + 1], logps[:, :t + 1], eos_id)
        # ended rows leave the batch when at most half of it is still going: a CPU GEMM runs rows in
        # blocks of 8 (one row fewer saves nothing) and each drop copies the cache
        if not synced and going <= len(ended) // 2:
            keep = (~ended).nonzero().squeeze(1)
            rows = keep if rows is None else rows[keep]
            token, mask, pos, ended = token[keep], mask[keep], pos[keep], ended[keep]
            cache.batch_select_indices(keep)
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
        pos = pos + 1
        logits = model(input_ids=token[:, None], attention_mask=mask, position_ids=pos[:, None],
                       past_key_values=cache, use_cache=True).logits[:, -1]
    return _decoded(tokens, logps, eos_id)


def _static_loop(model, static: "StaticDecoder", logits, mask, how: Sampling, eos_id: int, pad_id: int,
                 check_every: int) -> Decoded:
    """The full width every token: ended rows decode padding, masked out of the result."""
    device, (width, P), T = mask.device, mask.shape, how.max_new_tokens
    pos = position_ids(mask)[:, -1]
    tokens = torch.full((width, T), pad_id, dtype=torch.long, device=device)
    logps = torch.zeros((width, T), dtype=torch.float32, device=device)
    ended = torch.zeros(width, dtype=torch.bool, device=device)
    lengths = torch.full((width,), T, dtype=torch.long, device=device)  # up to and including EOS
    for t in range(T):
        token, logp = next_tokens(logits, how, None if how.greedy else uniforms(width, device))
        token = token.masked_fill(ended, pad_id)
        tokens[:, t], logps[:, t] = token, logp
        ends = (token == eos_id) & ~ended
        lengths.masked_fill_(ends, t + 1)
        ended |= ends
        if t + 1 == T:
            break
        if (t + 1) % check_every == 0:  # the loop's only host sync
            going = (~ended).sum()
            if how.synced:
                dist.all_reduce(going)
            if going == 0:
                break
        pos += 1
        logits = static.step(model, token, pos, P + t)
    n = int(lengths.max())
    return _decoded(tokens[:, :n], logps[:, :n], eos_id)


def _decoded(tokens: torch.Tensor, logps: torch.Tensor, eos_id: int) -> Decoded:
    """The loops' result, log-prob 0 after each row's EOS: what they drew there became padding (set
    once here rather than masked every token)."""
    is_eos = (tokens == eos_id).long()
    return Decoded(tokens, logps.masked_fill_(is_eos.cumsum(dim=1) - is_eos > 0, 0.0))


class StaticDecoder:
    """A static KV cache of fixed width and length, its attention mask, and the one-token step over
    them: built once per model, width and length, kept beside the model (`_static_decoder`) so
    every step after reuses it, and with `graphs` the CUDA graphs torch.compile captured.

    The mask is built by transformers from the 2D padding mask (B, length) given here: with a static
    cache and one query token it never skips to `is_causal`, so it holds no host sync. The cache stays
    allocated between steps, through the update: width x length x layers x 2 x key-value heads x head
    size x bytes (128 rows x 512 positions of a Qwen2.5-0.5B shape in bfloat16: 0.8 GB).
    """

    def __init__(self, model, width: int, length: int, graphs: bool) -> None:
        from transformers import StaticCache  # noqa: PLC0415 - the trainer imports transformers anyway

        self.cache = StaticCache(config=model.config, max_cache_len=length)
        self.width, self.length, self.graphs = width, length, graphs
        self.mask: torch.Tensor | None = None  # (width, length) long, made by the first load
        self.forward = torch.compile(_one_token, mode="reduce-overhead", fullgraph=False, dynamic=False) \
            if graphs else _one_token

    @staticmethod
    def fits(model) -> bool:
        """Whether every layer of the model takes a plain static cache layer (no sliding window,
        no linear attention): otherwise the eager loop runs."""
        from transformers import StaticCache  # noqa: PLC0415
        from transformers.cache_utils import StaticLayer  # noqa: PLC0415

        return all(type(layer) is StaticLayer for layer in StaticCache(config=model.config, max_cache_len=1).layers)

    @staticmethod
    @functools.cache
    def missing() -> str | None:
        """Why this transformers' static cache cannot hold the static loop, or None when it can.

        `load` writes each layer's keys and values itself and then the layer's write position,
        `StaticLayer.cumulative_length`: a tensor (so a compiled step reads it without recompiling) that
        transformers keeps from 5.4.0 on. Before, a layer wrote where a `cache_position` argument said,
        which this loop does not pass (5.0 to 5.3: AttributeError at the first load).

        >>> StaticDecoder.missing() is None  # the pinned transformers
        True
        """
        import transformers  # noqa: PLC0415
        from transformers.cache_utils import StaticLayer  # noqa: PLC0415

        try:
            position = getattr(StaticLayer(max_cache_len=1), "cumulative_length", None)
        except Exception as exc:  # noqa: BLE001 - a constructor of another signature: the same answer
            return f"transformers {transformers.__version__}'s StaticLayer(max_cache_len=1) failed: {exc}"
        if not isinstance(position, torch.Tensor):
            return f"transformers {transformers.__version__}'s StaticLayer keeps no cumulative_length tensor"
        return None

    def load(self, prompts, copies: int, mask: torch.Tensor) -> None:
        """The prompt's keys and values (a dynamic cache of the N distinct prompts, P tokens) copied to
        their `copies` rows, once; the rest of the cache zeroed; the padding mask of the rows (width, P)."""
        width, P = mask.shape
        self.cache.reset()
        for mine, theirs in zip(self.cache.layers, prompts.layers):
            if not mine.is_initialized:  # the first load: allocated (and marked static) as the prompt's
                mine.lazy_initialization(theirs.keys[:1].expand(width, -1, -1, -1),
                                         theirs.values[:1].expand(width, -1, -1, -1))
            for static, prompt in ((mine.keys, theirs.keys), (mine.values, theirs.values)):
                n = prompt.shape[0]
                static.view(n, copies, *static.shape[1:])[:, :, :, :P].copy_(prompt[:, None])
            mine.cumulative_length.fill_(P)
        if self.mask is None:
            self.mask = mask.new_zeros(width, self.length)
        self.mask.zero_()
        self.mask[:, :P] = mask

    def step(self, model, token: torch.Tensor, pos: torch.Tensor, slot: int) -> torch.Tensor:
        """The logits (width, V) after each row's `token` (width,) at positions `pos` (width,),
        written to cache slot `slot` (the mask's column that opens for it)."""
        self.mask[:, slot] = 1
        if not self.graphs:
            return self.forward(model, self.cache, token[:, None], pos[:, None], self.mask)
        torch.compiler.cudagraph_mark_step_begin()  # the last step's logits have been read: overwrite them
        try:
            return self.forward(model, self.cache, token[:, None], pos[:, None], self.mask)
        except Exception as exc:  # a model torch.compile cannot capture: say which option avoids it
            raise RuntimeError(f"decode: compiling the decode step as CUDA graphs failed ({type(exc).__name__}: "
                               f"{str(exc).splitlines()[0][:300] if str(exc) else ''}); run with --decode static "
                               "(the same loop, uncompiled) or --decode eager") from exc


def _one_token(model, cache, ids: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True)
    return out.logits[:, -1]


@functools.cache
def _eager_instead(why: str) -> None:
    """The one warning a process gets when its transformers cannot run the static loop."""
    warnings.warn(f"decode: the static and graph loops need transformers 5.4.0 or later ({why}); "
                  "the eager loop decodes instead", RuntimeWarning, stacklevel=5)  # decode_with_logp's caller


# model -> {(width, graphs, dtype, device): StaticDecoder}; weak, so a model that goes frees its caches
_DECODERS: "weakref.WeakKeyDictionary[torch.nn.Module, dict]" = weakref.WeakKeyDictionary()


def _static_decoder(model, width: int, needed: int, graphs: bool) -> StaticDecoder | None:
    """The model's StaticDecoder for `width` rows and at least `needed` positions (prompt +
    max_new_tokens), built when there is none that long; None when the model does not fit one, or this
    transformers' static cache cannot hold the loop (said once, in a warning: the eager loop runs)."""
    param = next(model.parameters())
    key = (width, graphs, param.dtype, param.device)
    decoder = _DECODERS.get(model, {}).get(key)
    if decoder is None or decoder.length < needed:
        if StaticDecoder.missing():
            _eager_instead(StaticDecoder.missing())
            return None
        if not StaticDecoder.fits(model):
            return None
        length = -(-needed // CACHE_STEP) * CACHE_STEP
        _DECODERS.setdefault(model, {})[key] = decoder = StaticDecoder(model, width, length, graphs)
    return decoder
