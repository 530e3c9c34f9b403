"""Log-probabilities through the LM head a chunk of tokens at a time (trainer/chunked_logprobs.py).

The same numbers and gradients as a log-softmax over the whole float32 logits (today's math, kept
below as the reference and still token_logprobs' path with chunk_bytes=inf), on the models and
wrappers the trainer runs: tied embeddings, a biased head, temperature, an entropy bonus, left-padded
prompts sharing their group's cache, gradient checkpointing, LoRA, DDP; the models whose logits are
not their head's product keep the whole logits. Nothing of shape (B, T, V) is kept for backward.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
import torch
from torch import nn
from transformers import Gemma2Config, Gemma2ForCausalLM, Qwen2Config, Qwen2ForCausalLM

from grpo_lab.objective import functions as objective
from grpo_lab.trainer import chunked_logprobs, tiny
from grpo_lab.trainer import rollout as rollout_module
from grpo_lab.trainer.chunked_logprobs import chunked_head, head_logprobs
from grpo_lab.trainer.config import from_dict
from grpo_lab.trainer.decode import Sampling
from grpo_lab.trainer.models import add_lora, enable_gradient_checkpointing
from grpo_lab.trainer.rollout import sample, token_logprobs
from grpo_lab.trainer.run import train
from model_helpers import lively
from trainer_helpers import ROOT, read_table, torchrun

CPU = torch.device("cpu")
WHOLE = math.inf  # chunk_bytes: the whole logits, today's path
PROMPTS = ["1+2=", "13+4=", "5*6=", "7-1="]  # different lengths: left padding


def chunks_of(tokens: int, vocab: int) -> int:
    """chunk_bytes that cut the logits into chunks of `tokens` tokens."""
    return tokens * vocab * 4


def whole_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float):
    """Today's math: a float32 log-softmax over the whole logits, a gather, the entropy of the rows."""
    logp_all = torch.log_softmax(logits.float() / temperature, dim=-1)
    return logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1), objective.entropy(logp_all)


def tiny_model() -> nn.Module:
    return lively(tiny.build_model(tiny.build_tokenizer(), seed=0))


def qwen_model(vocab: int = 50, bias: bool = False, dtype: torch.dtype = torch.float32) -> nn.Module:
    """A 2-layer Qwen2 from a config, its own (untied) head, with a bias if asked."""
    config = Qwen2Config(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    if bias:
        model.lm_head = nn.Linear(32, vocab, bias=True)
    return lively(model).to(dtype)


def rollout_of(model, copies: int = 3, max_new_tokens: int = 6):
    torch.manual_seed(0)
    return sample(model, tiny.build_tokenizer(), PROMPTS, Sampling(copies, max_new_tokens, 1.3), CPU)


def step(model, rollout, chunk_bytes, temperature=1.3, entropy_coef=0.2, params=None):
    """log-probs, entropies and the gradients of a loss with both (an entropy bonus) in it."""
    model.zero_grad(set_to_none=True)
    logp, entropy = token_logprobs(model, rollout, temperature, with_entropy=True, entropy_grad=entropy_coef > 0,
                                   chunk_bytes=chunk_bytes)
    mask = rollout.completion_mask.float()
    weights = torch.linspace(-1, 1, mask.numel()).view_as(mask)  # advantages of both signs
    ((logp * weights * mask).sum() + entropy_coef * (entropy * mask).sum()).backward()
    named = params if params is not None else dict(model.named_parameters())
    return logp.detach(), entropy.detach(), {n: p.grad.clone() for n, p in named.items() if p.grad is not None}


def assert_same(got, want, atol=1e-5, rtol=1e-4):
    (logp, entropy, grads), (logp_w, entropy_w, grads_w) = got, want
    assert torch.allclose(logp, logp_w, atol=atol) and torch.allclose(entropy, entropy_w, atol=atol)
    assert grads.keys() == grads_w.keys() and grads_w
    for name, g in grads_w.items():
        assert torch.allclose(grads[name], g, rtol=rtol, atol=atol * g.abs().max()), name


# --- the function itself ----------------------------------------------------------------------


def test_chunk_tokens_examples_run():
    import doctest

    assert doctest.testmod(chunked_logprobs).failed == 0


@pytest.mark.parametrize("tokens_per_chunk", [1, 3, 7, 10])  # 10: one chunk; 3 and 7 leave a remainder
def test_values_and_gradients_equal_the_whole_log_softmax(tokens_per_chunk):
    torch.manual_seed(0)
    B, T, H, V, temperature = 2, 5, 16, 37, 0.7
    head = nn.Linear(H, V, bias=True)
    nn.init.normal_(head.weight, std=0.5)
    hidden = torch.randn(B, T, H, requires_grad=True)
    targets = torch.randint(0, V, (B, T))
    a, b = torch.randn(B, T), torch.randn(B, T)  # any weights on the log-probs and on the entropies

    def grads(logp, entropy):
        head.zero_grad(set_to_none=True)
        hidden.grad = None
        ((a * logp).sum() + (b * entropy).sum()).backward()
        return [hidden.grad.clone(), head.weight.grad.clone(), head.bias.grad.clone()]

    want = whole_logprobs(head(hidden), targets, temperature)
    got = head_logprobs(hidden, head, targets, temperature, entropy_grad=True,
                        chunk_bytes=chunks_of(tokens_per_chunk, V))
    for g, w in zip(got, want):
        assert torch.allclose(g, w, atol=1e-6)
    for g, w in zip(grads(*got), grads(*want)):
        assert torch.allclose(g, w, atol=1e-6, rtol=1e-5)


def test_an_entropy_without_its_graph_is_a_number_and_adds_no_gradient():
    torch.manual_seed(0)
    head, hidden, targets = nn.Linear(8, 11), torch.randn(3, 4, 8, requires_grad=True), torch.randint(0, 11, (3, 4))
    logp, entropy = head_logprobs(hidden, head, targets, with_entropy=True, chunk_bytes=chunks_of(5, 11))
    assert logp.requires_grad and not entropy.requires_grad
    assert torch.allclose(entropy, whole_logprobs(head(hidden), targets, 1.0)[1], atol=1e-6)
    logp.sum().backward()
    got = hidden.grad.clone()
    hidden.grad = None
    whole_logprobs(head(hidden), targets, 1.0)[0].sum().backward()
    assert torch.allclose(got, hidden.grad, atol=1e-6)
    # the entropy alone in the loss (the log-probs' gradient is None in backward)
    _, entropy = head_logprobs(hidden, head, targets, entropy_grad=True, chunk_bytes=chunks_of(5, 11))
    hidden.grad = None
    entropy.sum().backward()
    got = hidden.grad.clone()
    hidden.grad = None
    whole_logprobs(head(hidden), targets, 1.0)[1].sum().backward()
    assert torch.allclose(got, hidden.grad, atol=1e-6)


def test_nothing_of_the_logits_shape_is_kept_for_backward():
    model = tiny_model()
    rollout = rollout_of(model)
    vocab, hidden_size = model.lm_head.weight.shape
    B, T = rollout.completion_mask.shape

    def saved_shapes(chunk_bytes) -> list[tuple[int, ...]]:
        shapes = []

        def pack(t):
            shapes.append(tuple(t.shape))
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            token_logprobs(model, rollout, 1.3, entropy_grad=True, chunk_bytes=chunk_bytes)
        return [s for s in shapes if vocab in s and s != (vocab, hidden_size)]  # the head's weight is no copy

    assert (B, T, vocab) in saved_shapes(WHOLE)  # the hook sees the whole logits where they are kept
    assert saved_shapes(chunks_of(4, vocab)) == []


# --- through the models and wrappers the trainer runs ------------------------------------------


def test_tied_embeddings_left_padded_prompts_and_shared_prompts_give_the_same_numbers():
    model = tiny_model()
    assert model.lm_head.weight is model.model.embed_tokens.weight  # one weight, two uses
    rollout = rollout_of(model)
    assert (rollout.attention_mask[:, 0] == 0).any()  # left padding
    vocab = model.lm_head.out_features
    assert_same(step(model, rollout, chunks_of(5, vocab)), step(model, rollout, WHOLE))
    some = torch.tensor([1, 2, 5, 11])  # a minibatch
    assert_same(step(model, rollout.select(some), chunks_of(2, vocab)), step(model, rollout.select(some), WHOLE))


def test_pi_old_without_grad_equals_the_update_forward_bit_for_bit_in_chunks():
    # GRPO's one-pass step takes pi_old from the update's own forward (grpo.py): the two must agree exactly
    model = tiny_model()
    rollout = rollout_of(model)
    chunk_bytes = chunks_of(4, model.lm_head.out_features)
    with torch.no_grad():
        separate, entropy_separate = token_logprobs(model, rollout, 1.3, with_entropy=True, chunk_bytes=chunk_bytes)
    logp, entropy = token_logprobs(model, rollout, 1.3, with_entropy=True, chunk_bytes=chunk_bytes)
    assert logp.requires_grad and torch.equal(logp.detach(), separate) and torch.equal(entropy, entropy_separate)


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_an_untied_head_with_a_bias(temperature):
    model = qwen_model(bias=True)
    rollout = rollout_of(tiny_model())  # the tiny tokenizer's ids are in this vocabulary too
    assert chunked_head(model, tokens=rollout.completion_mask.numel(), chunk_bytes=0) is model.lm_head
    got = step(model, rollout, chunks_of(3, 50), temperature)
    assert "lm_head.bias" in got[2]
    assert_same(got, step(model, rollout, WHOLE, temperature))


def test_bfloat16_matches_to_bfloat16_rounding():
    model = qwen_model(dtype=torch.bfloat16)
    rollout = rollout_of(tiny_model())
    got, want = step(model, rollout, chunks_of(3, 50)), step(model, rollout, WHOLE)
    assert torch.allclose(got[0], want[0], atol=2e-2) and torch.allclose(got[1], want[1], atol=2e-2)
    for name, g in want[2].items():
        assert torch.allclose(got[2][name].float(), g.float(), rtol=5e-2, atol=2e-2 * float(g.abs().max())), name


def test_with_gradient_checkpointing():
    model = tiny_model()
    rollout = rollout_of(model)
    enable_gradient_checkpointing(model)
    calls = []
    for layer in model.model.layers:
        inner = layer._gradient_checkpointing_func
        layer._gradient_checkpointing_func = lambda *a, _f=inner, **k: calls.append(1) or _f(*a, **k)
    got = step(model, rollout, chunks_of(5, model.lm_head.out_features))
    assert calls  # the layers were checkpointed
    assert_same(got, step(model, rollout, WHOLE))


def test_with_lora_the_adapters_are_used_and_trained():
    model = add_lora(tiny_model(), r=4, alpha=8.0, target_modules="all-linear")
    with torch.no_grad():  # adapters start as a no-op (B = 0): give them a value
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.3, generator=torch.Generator().manual_seed(2))
    rollout = rollout_of(model)
    vocab = model.get_output_embeddings().out_features
    trained = {n: p for n, p in model.named_parameters() if p.requires_grad}
    assert trained and all("lora" in n for n in trained)
    assert chunked_head(model, tokens=rollout.completion_mask.numel(), chunk_bytes=0) is not None
    got = step(model, rollout, chunks_of(5, vocab), params=trained)
    assert_same(got, step(model, rollout, WHOLE, params=trained))
    with model.disable_adapter():
        base = token_logprobs(model, rollout, 1.3, chunk_bytes=chunks_of(5, vocab))[0]
    assert (base - got[0]).abs().max() > 1e-3  # the adapters changed the numbers: they ran


def test_a_model_that_changes_its_heads_output_keeps_the_whole_logits():
    # Gemma 2 soft-caps its logits after the head: a chunked head alone would give other numbers
    def gemma(softcap):
        torch.manual_seed(0)
        return lively(Gemma2ForCausalLM(Gemma2Config(
            vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
            num_key_value_heads=1, head_dim=16, final_logit_softcapping=softcap)))

    model = gemma(softcap=2.0)
    rollout = rollout_of(tiny_model())
    tokens = rollout.completion_mask.numel()
    assert chunked_head(model, tokens=tokens, chunk_bytes=0) is None
    assert torch.equal(token_logprobs(model, rollout, chunk_bytes=0)[0], token_logprobs(model, rollout)[0])
    plain = gemma(softcap=None)  # the same model without it: a plain head
    assert chunked_head(plain, tokens=tokens, chunk_bytes=0) is plain.lm_head


def test_which_heads_are_chunked():
    model = qwen_model()
    tokens = 24
    assert chunked_head(model, tokens=tokens, chunk_bytes=chunks_of(tokens, 50)) is None  # fits: whole logits
    assert chunked_head(model, tokens=tokens, chunk_bytes=chunks_of(tokens - 1, 50)) is model.lm_head
    handle = model.lm_head.register_forward_hook(lambda *_: None)
    assert chunked_head(model, tokens=tokens, chunk_bytes=0) is None  # a hook would see hidden states
    handle.remove()

    class Quantised(nn.Linear):
        pass

    model.lm_head = Quantised(32, 50)
    assert chunked_head(model, tokens=tokens, chunk_bytes=0) is None


# --- the trainer and several processes ----------------------------------------------------------


@pytest.fixture
def chunked_everywhere(monkeypatch):
    """Every token_logprobs of a run in chunks of 8 tokens of the tiny vocabulary; counts the calls."""
    calls = []
    monkeypatch.setattr(chunked_logprobs, "CHUNK_BYTES", chunks_of(8, len(tiny.build_tokenizer())))
    real = rollout_module.head_logprobs
    monkeypatch.setattr(rollout_module, "head_logprobs", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_a_run_in_chunks(tmp_path, chunked_everywhere, algo):
    extra = {"entropy_coef": 0.01, "passes": 2} if algo == "grpo" else {"minibatches": 2}
    assert train(from_dict({"algo": algo, "prompts_per_step": 4, "group_size": 4, "sft_steps": 0, "max_steps": 2,
                            "temperature": 1.2, "logging": "scalars", "runs_dir": str(tmp_path), "name": algo,
                            "flush_seconds": 0, **extra})) == 0
    assert chunked_everywhere  # pi_old, the reference and the updates went through the chunks
    scalars = read_table(tmp_path / algo, "scalars")
    assert len(scalars) == 2 and scalars["loss/total"].notna().all() and scalars["entropy/mean"].gt(0).all()


def test_ddp_gradients_in_chunks_equal_one_process_and_fsdp_keeps_the_whole_logits(tmp_path):
    out = tmp_path / "result.json"
    proc = subprocess.run(torchrun(str(Path(__file__).resolve().parents[1] / "chunked_logprobs_worker.py"), str(out)),
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["ddp"]["chunked"] and not results["fsdp"]["chunked"]
    for strategy, r in results.items():
        assert r["logp_diff"] < 1e-5 and r["grad_rel_diff"] < 1e-4, (strategy, r)
