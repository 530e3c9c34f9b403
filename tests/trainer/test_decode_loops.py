"""The two sampling loops of trainer/decode.py, eager (dynamic cache, ended rows leave the batch) and static
(a fixed-width static KV cache, ended rows kept and masked, the GPU's), on Llama- and Qwen2-shaped models made
from a config: the same tokens greedy and sampled from one seed, and each token's sampler log-prob equal to
the training forward's (rollout.token_logprobs) in float32, to rounding.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, cache_utils
from transformers.cache_utils import Cache, StaticLayer

from grpo_lab import rewards
from grpo_lab.trainer import decode as decode_module, records, tiny
from grpo_lab.trainer.batch import Batch
from grpo_lab.trainer.decode import Sampling, decode_with_logp, loop_for
from grpo_lab.trainer.rollout import sample, token_logprobs
from grpo_lab.trainer.timing import PhaseTimer
from grpo_lab.trainer.updates import LastPass, TokenStats
from shared_runs import grpo_run  # noqa: F401 (a fixture: pytest finds it by name)
from trainer_helpers import read_table

CPU = torch.device("cpu")
G, MAX_NEW = 3, 24
# three prompt lengths: the shorter ones are left-padded
PROMPTS = ["1+2=", "13+4=", "3+4=", "5+15=", "18+16=", "7+0=", "9+9=", "10+2="]


def shaped(kind: str, tokenizer) -> torch.nn.Module:
    """A 2-layer model of that family, its matrices drawn wide (std 0.3, seeded) so completions differ
    from prompt to prompt, and EOS's output row scaled up so most rows end early, at different tokens, and
    a few run on to max_new_tokens."""
    common = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                  pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                  eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = (LlamaForCausalLM(LlamaConfig(**common)) if kind == "llama" else
             Qwen2ForCausalLM(Qwen2Config(**common, use_sliding_window=False)))  # Qwen2: q, k, v with biases
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.3)
        model.lm_head.weight[tokenizer.eos_token_id] *= {"llama": 2.0, "qwen2": 1.6}[kind]  # 60-90 % of rows end
    return model.eval()


def rounding_allows(model, temperature: float) -> float:
    """How far float32 rounding lets two computations of a token's log-prob fall apart when they compute the
    same logits in another order (a static or a dynamic cache, 24 rows or 3, the whole sequence at once: the
    matrix products block their sums differently). Derived, not measured:
    - logp_i = z_i - logsumexp(z), z = logits / T: logits moved by d move logp_i by (d_i - sum_j p_j d_j) / T,
      at most 2 max|d| / T;
    - a logit is a sum of products; a float32 sum of n products, in any order, is within gamma_n * sum|products|
      of the exact one (gamma_n = n u / (1 - n u), u = 2^-24), so two orders are within twice that. The head's
      products h_k W_jk add up to at most |h| |W_j| (Cauchy-Schwarz), h the final RMSNorm's output, of norm
      sqrt(H) * max|gain|;
    - each decoder layer adds its own reordered sums (n at most the MLP's width) to the residual stream that
      norm reads: counted once more per layer at the head's scale (first order: RMSNorm rescales to that norm);
    - log-softmax's own rounding, once in each computation: exp, a sum of V terms, a log: (log2 V + 3) u each.
    For these 2-layer models at T = 0.7 it comes to about 4e-3; what a wrong temperature or a token read one
    position off moves is 0.1 to 1."""
    c = model.config
    u = 2.0 ** -24
    n = max(c.hidden_size, c.intermediate_size)
    gamma = n * u / (1 - n * u)
    with torch.no_grad():
        h = math.sqrt(c.hidden_size) * float(model.model.norm.weight.abs().max())
        w = float(model.lm_head.weight.norm(dim=1).max())
    logits = (c.num_hidden_layers + 1) * 2 * gamma * h * w
    return 2 * logits / temperature + 2 * (math.log2(c.vocab_size) + 3) * u


@pytest.fixture(scope="module")
def tokenizer():
    return tiny.build_tokenizer()


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def model(request, tokenizer):
    return shaped(request.param, tokenizer)


def encode(tokenizer, prompts=PROMPTS):
    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    return enc["input_ids"], enc["attention_mask"]


def run(model, tokenizer, how: Sampling, seed: int = 7, **kw):
    torch.manual_seed(seed)
    ids, mask = encode(tokenizer)
    return decode_with_logp(model, ids, mask, how, eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id, **kw)


@pytest.mark.parametrize("greedy, temperature", [(True, 1.0), (False, 1.0), (False, 0.7)])
def test_the_static_loop_draws_the_eager_loops_tokens(model, tokenizer, monkeypatch, greedy, temperature):
    dropped = []
    select = Cache.batch_select_indices
    monkeypatch.setattr(Cache, "batch_select_indices",
                        lambda self, rows: dropped.append(len(rows)) or select(self, rows))
    eager = run(model, tokenizer, Sampling(G, MAX_NEW, temperature, greedy=greedy, decode="eager"))
    assert dropped  # ended rows left the eager batch: its later draws came from fewer rows
    static = run(model, tokenizer, Sampling(G, MAX_NEW, temperature, greedy=greedy, decode="static"))
    assert torch.equal(static.tokens, eager.tokens)
    assert (static.logp - eager.logp).abs().max() <= rounding_allows(model, temperature)
    # the cases that matter happened: rows of one prompt differ, some end early, some run to the end
    ended = (eager.tokens == tokenizer.eos_token_id).any(dim=1)
    assert ended.any() and not ended.all() and eager.tokens.shape == (len(PROMPTS) * G, MAX_NEW)
    assert len({tuple(r) for r in eager.tokens.tolist()}) > (len(PROMPTS) if not greedy else len(PROMPTS) // 2)
    after = (ended[:, None] & ((eager.tokens == tokenizer.eos_token_id).long().cumsum(1)
                               - (eager.tokens == tokenizer.eos_token_id).long() > 0))
    assert (eager.tokens[after] == tokenizer.pad_token_id).all() and (eager.logp[after] == 0).all()


def test_both_loops_draw_one_number_per_row_of_the_full_width_every_token(model, tokenizer, monkeypatch):
    widths = []
    draw = decode_module.uniforms
    monkeypatch.setattr(decode_module, "uniforms", lambda width, device: widths.append(width) or draw(width, device))
    for loop in ("eager", "static"):
        widths.clear()
        out = run(model, tokenizer, Sampling(G, MAX_NEW, decode=loop))
        assert widths == [len(PROMPTS) * G] * out.tokens.shape[1], loop


def test_the_static_loop_asks_whether_all_ended_every_k_tokens(tokenizer):
    """Every row's fourth token is EOS: the static loop runs on to the next multiple of k, then stops;
    the result is cut at the longest completion, as the eager loop's."""
    model = tiny.build_model(tokenizer, seed=0).eval()
    calls = []

    def eos_fourth(_module, _args, logits):  # the prefill, then one forward per token
        calls.append(1)
        if len(calls) == 4:
            logits[..., tokenizer.eos_token_id] = 1e4
        return logits

    model.lm_head.register_forward_hook(eos_fourth)
    ids, mask = encode(tokenizer)
    how = dict(eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id)
    eager = decode_with_logp(model, ids, mask, Sampling(G, MAX_NEW, greedy=True, decode="eager"), **how)
    assert eager.tokens.shape[1] == 4 and (eager.tokens[:, 3] == tokenizer.eos_token_id).all()
    for k in (1, 3, 8):
        calls.clear()
        static = decode_with_logp(model, ids, mask, Sampling(G, MAX_NEW, greedy=True, decode="static"),
                                  check_every=k, **how)
        assert torch.equal(static.tokens, eager.tokens)
        assert len(calls) - 1 == math.ceil(4 / k) * k - 1  # token forwards until the first check after the EOS


def test_the_static_cache_is_built_once_and_reused(model, tokenizer):
    first = run(model, tokenizer, Sampling(G, MAX_NEW, decode="static"))
    kept = dict(decode_module._DECODERS[model])
    again = run(model, tokenizer, Sampling(G, MAX_NEW, decode="static"))
    assert torch.equal(first.tokens, again.tokens)  # nothing of the last step's cache leaks into the next
    assert decode_module._DECODERS[model] == kept and len(kept) == 1
    (decoder,) = kept.values()
    assert decoder.length % decode_module.CACHE_STEP == 0 and decoder.length >= 6 + MAX_NEW
    shorter = run(model, tokenizer, Sampling(G, 5, decode="static"))  # fits the same cache
    assert decode_module._DECODERS[model] == kept and shorter.tokens.shape[1] <= 5


@pytest.mark.parametrize("loop", ["eager", "static"])
def test_the_samplers_logprobs_are_the_training_forwards(model, tokenizer, loop):
    temperature = 0.7
    torch.manual_seed(3)
    rollout = sample(model, tokenizer, PROMPTS, Sampling(G, MAX_NEW, temperature, decode=loop), CPU)
    assert rollout.sampler_logp.dtype == torch.float32 and rollout.sampler_logp.shape == rollout.completion_mask.shape
    with torch.no_grad():
        trained, _ = token_logprobs(model, rollout, temperature)
    m = rollout.completion_mask.bool()
    # the same logits in another order: the sampler's a token at a time from a cache, the training forward's
    # the whole sequence at once
    gap = (rollout.sampler_logp[m] - trained[m]).abs()
    assert gap.max() <= rounding_allows(model, temperature)
    assert (rollout.sampler_logp[~m] == 0).all()
    # a minibatch and a trimmed batch carry it with their rows and columns
    some = torch.tensor([0, 4, 5])
    assert torch.equal(rollout.select(some).sampler_logp, rollout.sampler_logp[some])
    part = rollout.select(some).trimmed()
    assert torch.equal(part.sampler_logp, rollout.sampler_logp[some, :part.completion_mask.shape[1]])


def test_loop_choice_by_device_and_option():
    cuda, cpu = torch.device("cuda"), CPU
    assert [loop_for(Sampling(2, 4, decode=d), cuda) for d in ("auto", "eager", "static", "graphs")] == [
        "graphs", "eager", "static", "graphs"]
    assert [loop_for(Sampling(2, 4, decode=d), cpu) for d in ("auto", "eager", "static", "graphs")] == [
        "eager", "eager", "static", "static"]
    # weights sharded over processes (FSDP): nothing captured as a graph
    assert [loop_for(Sampling(2, 4, synced=True, decode=d), cuda) for d in ("auto", "graphs")] == ["eager", "static"]
    with pytest.raises(ValueError, match="decode"):
        loop_for(Sampling(2, 4, decode="fast"), cpu)


def test_a_model_with_sliding_windows_decodes_eager(tokenizer):
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, use_sliding_window=True, sliding_window=4,
                         max_window_layers=0, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    model = Qwen2ForCausalLM(config).eval()
    assert not decode_module.StaticDecoder.fits(model)
    ids, mask = encode(tokenizer)
    out = decode_with_logp(model, ids, mask, Sampling(2, 4, decode="static"), eos_id=tokenizer.eos_token_id,
                           pad_id=tokenizer.pad_token_id)
    assert out.tokens.shape[0] == 2 * len(PROMPTS) and model not in decode_module._DECODERS


class PositionlessStaticLayer(StaticLayer):
    """transformers 5.0 to 5.3's static cache layer: no write position of its own (a cache_position argument
    said where to write)."""

    def __init__(self, max_cache_len: int, **kwargs):
        super().__init__(max_cache_len, **kwargs)
        vars(self).pop("cumulative_length", None)


@pytest.fixture
def positionless_static_layers(monkeypatch):
    """transformers' StaticCache builds PositionlessStaticLayer layers; the decode module asks afresh."""
    monkeypatch.setattr(cache_utils, "StaticLayer", PositionlessStaticLayer)
    mapping = getattr(cache_utils, "STATIC_LAYER_TYPE_MAPPING", {})  # what StaticCache builds its layers from
    for kind, layer in mapping.items():
        if layer is StaticLayer:
            monkeypatch.setitem(mapping, kind, PositionlessStaticLayer)
    decode_module.StaticDecoder.missing.cache_clear()
    decode_module._eager_instead.cache_clear()
    yield
    decode_module.StaticDecoder.missing.cache_clear()
    decode_module._eager_instead.cache_clear()


def test_an_older_transformers_static_cache_decodes_eager_after_one_warning(tokenizer, positionless_static_layers):
    model = shaped("qwen2", tokenizer)  # its own: no static decoder of an earlier test kept beside it
    ids, mask = encode(tokenizer)
    # the plant fails as transformers 5.3 did, where the static loop ran anyway
    planted = decode_module.StaticDecoder(model, len(PROMPTS) * G, 256, graphs=False)
    with torch.no_grad():
        prompts = model(input_ids=ids, attention_mask=mask, use_cache=True).past_key_values
    with pytest.raises(AttributeError, match="cumulative_length"):
        planted.load(prompts, G, mask.repeat_interleave(G, dim=0))
    assert "StaticLayer keeps no cumulative_length" in decode_module.StaticDecoder.missing()
    eager = run(model, tokenizer, Sampling(G, MAX_NEW, decode="eager"))
    with pytest.warns(RuntimeWarning, match="transformers 5.4.0 or later") as caught:
        outs = [run(model, tokenizer, Sampling(G, MAX_NEW, decode=loop)) for loop in ("static", "graphs", "static")]
    assert len(caught) == 1 and "cumulative_length" in str(caught[0].message)
    assert all(torch.equal(out.tokens, eager.tokens) and torch.equal(out.logp, eager.logp) for out in outs)
    assert model not in decode_module._DECODERS


def test_the_tokens_table_gets_the_samplers_logprobs(tokenizer):
    """records writes `logp_sampler` beside logp_old when the rollout has it (docs/run-directory.md)."""
    model = tiny.build_model(tokenizer, seed=0).eval()
    torch.manual_seed(0)
    rollout = sample(model, tokenizer, PROMPTS[:2], Sampling(2, 6), CPU)
    with torch.no_grad():
        old, entropy = token_logprobs(model, rollout, with_entropy=True)
    B, T = old.shape
    batch = Batch(rows=[{"prompt": p, "prompt_id": i} for i, p in enumerate(PROMPTS[:2])], group_size=2,
                  rollout=rollout, mask=rollout.completion_mask.float(),
                  scores=rewards.Scores(total=[1.0] * B, per_reward={"r": [1.0] * B}), totals=torch.ones(B),
                  old_logp=old, entropy=entropy, ref_logp=None)
    stats = TokenStats()
    stats.add(torch.ones(B, T), torch.zeros(B, T), torch.zeros(B, T, dtype=torch.bool),
              torch.zeros(B, T, dtype=torch.bool), batch.mask)
    logged = {}
    c = SimpleNamespace(timer=PhaseTimer(), writer=SimpleNamespace(level="full", log=logged.__setitem__),
                        dist=SimpleNamespace(active=False), reference=None, tokenizer=tokenizer, extra_kinds={},
                        reward_fns={"r": (None, 1.0)},
                        cfg=SimpleNamespace(token_detail_groups=2, group_size=2, clip_range=(0.8, 1.2)))
    last, per_token = LastPass.like(old), {"advantage": torch.zeros(B, T)}
    records.log_step_tables(c, 1, batch, stats, last, advantages=torch.zeros(B), per_token=per_token)
    tokens = logged["tokens"]
    n = int(rollout.completion_mask.sum())
    assert len(tokens["logp_sampler"]) == n
    assert torch.allclose(torch.tensor(tokens["logp_sampler"]), torch.tensor(tokens["logp_old"]), atol=1e-5)
    rollout.sampler_logp = None  # a rollout with tools: no such column
    logged.clear()
    records.log_step_tables(c, 1, batch, stats, last, advantages=torch.zeros(B), per_token=per_token)
    assert "logp_sampler" not in logged["tokens"] and "logp_old" in logged["tokens"]


def test_a_runs_tokens_table_holds_the_samplers_logprobs(grpo_run):
    """End to end: the trainer's tokens table has logp_sampler, pi_old's own figure to rounding (the same
    weights sampled and scored; the sampler's forward ran with a cache and few rows)."""
    tokens = read_table(grpo_run, "tokens")
    assert tokens["logp_sampler"].notna().all()
    assert ((tokens["logp_sampler"] - tokens["logp_old"]).abs() < 1e-4).all()
