"""Sampling (trainer/decode.py) and scoring with a group's prompt run once (rollout.completion_logits).

What is drawn is softmax(logits / T) exactly; greedy decoding matches transformers' generate token
for token, also when ended rows leave the batch; running a shared prompt once changes no
log-probability and no gradient beyond rounding.
"""

import doctest

import pytest
import torch
from transformers.cache_utils import Cache

from grpo_lab.trainer import decode as decode_module
from grpo_lab.trainer.decode import FEW_ROWS, Sampling, decode, draw, few_row_linears, position_ids
from grpo_lab.trainer.rollout import sample, token_logprobs
from model_helpers import greedy_endings, lively

CPU = torch.device("cpu")
PROMPTS = ["1+2=", "13+4=", "3+4=", "5+15="]  # two lengths: the shorter ones are left-padded


def within(got: torch.Tensor, want: torch.Tensor, n: int, sigmas: float = 5.0) -> bool:
    """Observed frequencies within `sigmas` binomial standard deviations of the probabilities."""
    return bool(((got - want).abs() <= sigmas * (want * (1 - want) / n).sqrt() + 1e-12).all())


def test_the_docstring_examples_run():
    assert doctest.testmod(decode_module).failed == 0


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_draw_follows_the_softmax_at_the_temperature_and_never_draws_probability_zero(temperature):
    logits = torch.tensor([2.0, 0.0, -1.0, float("-inf"), 1.0])
    n = 40_000
    torch.manual_seed(0)
    counts = draw(logits.expand(n, -1), temperature).bincount(minlength=5)
    assert counts[3] == 0
    assert within(counts / n, torch.softmax(logits / temperature, dim=-1), n)


def test_decoded_first_tokens_follow_the_models_own_distribution(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    enc = tokenizer(PROMPTS[:2], return_tensors="pt", padding=True, add_special_tokens=False)
    n, temperature = 4000, 0.7
    torch.manual_seed(0)
    first = decode(model, enc["input_ids"], enc["attention_mask"], Sampling(n, 1, temperature),
                   eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id)[:, 0]
    with torch.no_grad():
        logits = model(**enc, position_ids=position_ids(enc["attention_mask"])).logits[:, -1]
    for i in range(2):
        counts = first[i * n:(i + 1) * n].bincount(minlength=logits.shape[1])
        assert within(counts / n, torch.softmax(logits[i] / temperature, dim=-1), n)


def test_greedy_decoding_matches_generate_while_ended_rows_leave_the_batch(model_and_tokenizer, monkeypatch):
    model, tokenizer = model_and_tokenizer
    model = lively(model)
    ending, running = greedy_endings(model, tokenizer)
    prompts = ending + running[:2]
    dropped = []
    select = Cache.batch_select_indices
    monkeypatch.setattr(Cache, "batch_select_indices", lambda self, rows: dropped.append(len(rows)) or select(self, rows))
    ours = sample(model, tokenizer, prompts, Sampling(2, 24, greedy=True), CPU)
    assert dropped  # rows left the batch
    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    theirs = model.generate(**enc, do_sample=False, max_new_tokens=24, pad_token_id=tokenizer.pad_token_id,
                            eos_token_id=tokenizer.eos_token_id)[:, enc["input_ids"].shape[1]:]
    assert ours.completions == [t for t in tokenizer.batch_decode(theirs, skip_special_tokens=True) for _ in range(2)]
    lengths = ours.lengths.tolist()
    assert len(set(lengths)) >= 4 and max(lengths) == 24
    assert ours.completion_mask.shape[1] == 24
    assert (ours.completion_ids[ours.completion_mask == 0] == tokenizer.pad_token_id).all()


def test_decoding_stops_at_the_longest_completion(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    model = lively(model)
    out = sample(model, tokenizer, greedy_endings(model, tokenizer)[0], Sampling(3, 24, greedy=True), CPU)
    assert not out.truncated.any() and out.completion_mask.shape[1] == max(out.lengths.tolist()) < 24


def test_sampled_rows_are_padded_after_their_eos_and_marked_truncated_without_one(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    model = lively(model)
    torch.manual_seed(1)
    out = sample(model, tokenizer, PROMPTS, Sampling(8, 16, 1.5), CPU)
    ids, mask = out.completion_ids, out.completion_mask
    is_eos = ids == tokenizer.eos_token_id
    ended = is_eos.any(dim=1)
    assert ended.any() and (~ended).any()
    assert torch.equal(out.truncated, ~ended)
    first_eos = torch.where(ended, is_eos.float().argmax(dim=1), ids.shape[1])
    for row in range(len(ids)):
        n = int(first_eos[row]) + 1 if ended[row] else ids.shape[1]
        assert mask[row, :n].all() and not mask[row, n:].any()
        assert (ids[row, n:] == tokenizer.pad_token_id).all()


def reference_logprobs(model, rollout) -> torch.Tensor:
    """log pi of each completion token from one plain forward over every row, prompt and completion."""
    logits = model(input_ids=rollout.input_ids, attention_mask=rollout.attention_mask,
                   position_ids=position_ids(rollout.attention_mask)).logits
    logits = logits[:, rollout.prompt_len - 1:-1].float()
    return torch.log_softmax(logits, dim=-1).gather(-1, rollout.completion_ids.unsqueeze(-1)).squeeze(-1)


def test_a_prompt_run_once_for_its_group_changes_no_logprob_and_no_gradient(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    torch.manual_seed(0)
    rollout = sample(model, tokenizer, PROMPTS, Sampling(4, 8), CPU)
    mask = rollout.completion_mask.float()
    batch_sizes = []
    hook = model.model.register_forward_hook(lambda _m, _a, kw, _o: batch_sizes.append(kw["input_ids"].shape[0]),
                                             with_kwargs=True)
    shared, _ = token_logprobs(model, rollout)
    hook.remove()
    assert batch_sizes == [4, 16]  # the four prompts once, then every row's completion
    want = reference_logprobs(model, rollout)
    assert torch.allclose(shared, want, atol=1e-5)

    def grads(logp):
        model.zero_grad()
        (logp * mask).sum().backward()
        return {n: p.grad.clone() for n, p in model.named_parameters()}

    got, expected = grads(token_logprobs(model, rollout)[0]), grads(reference_logprobs(model, rollout))
    for name, g in expected.items():
        assert torch.allclose(got[name], g, rtol=1e-4, atol=1e-6), name

    some = torch.tensor([1, 2, 5, 14])  # a minibatch: three prompts, one of them twice
    assert torch.allclose(token_logprobs(model, rollout.select(some))[0], want[some], atol=1e-5)


def test_few_row_linears_compute_the_same_product_and_restore_the_layers():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.Linear(512, 256, bias=False),
                                torch.nn.Linear(256, 8))
    x = torch.randn(2, 3, 256)
    many = torch.randn(FEW_ROWS + 1, 256)
    want, want_many = model(x), model(many)
    with few_row_linears(model):
        assert ["forward" in vars(layer) for layer in model] == [True, True, False]  # the small layer: as it is
        assert torch.allclose(model(x), want, atol=1e-5)
        assert torch.equal(model(many), want_many)  # more rows: the layer's own product
    assert not any("forward" in vars(layer) for layer in model)
    with few_row_linears(model, on=False):
        assert not any("forward" in vars(layer) for layer in model)
