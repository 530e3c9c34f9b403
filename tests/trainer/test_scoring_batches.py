"""A batch cut down to some of its groups (dynamic sampling keeps the groups with a spread) keeps
their rows whole and drops the padding only the other groups needed."""

import math

import torch

from grpo_lab import rewards
from grpo_lab.trainer import tiny
from grpo_lab.trainer.decode import Sampling
from grpo_lab.trainer.rollout import sample, token_logprobs
from grpo_lab.trainer.batch import Batch
from model_helpers import greedy_endings, lively

CPU = torch.device("cpu")


def test_selected_groups_keep_their_rows_and_lose_the_padding_of_the_others():
    tokenizer = tiny.build_tokenizer()
    model = lively(tiny.build_model(tokenizer, seed=0).eval())
    G = 2
    ending, running = greedy_endings(model, tokenizer)
    long_prompt = max(running, key=len)  # its completion runs to the end; the two kept groups' end early
    prompts = [long_prompt] + [p for p in ending if len(p) < len(long_prompt)][:2]
    rollout = sample(model, tokenizer, prompts, Sampling(G, 24, greedy=True), CPU)
    with torch.no_grad():
        logp = token_logprobs(model, rollout)[0]
    n = len(rollout.completions)
    scores = rewards.Scores(total=[float(i) for i in range(n)], per_reward={"r": [float(i) for i in range(n)]})
    batch = Batch(rows=[{"prompt": p} for p in prompts], group_size=G, rollout=rollout,
                  mask=rollout.completion_mask.float(), scores=scores, totals=torch.arange(n, dtype=torch.float32),
                  old_logp=logp, entropy=torch.full_like(logp, math.nan), ref_logp=logp.clone())

    kept = batch.select_groups(torch.tensor([False, True, True]))
    rows = torch.arange(G, n)
    width = int(rollout.lengths[rows].max())
    assert width < rollout.completion_mask.shape[1]
    assert kept.rollout.prompt_len == max(len(p) for p in prompts[1:]) < rollout.prompt_len
    assert kept.mask.shape == kept.old_logp.shape == kept.ref_logp.shape == (len(rows), width)
    assert kept.rollout.completions == rollout.completions[G:] and kept.scores.total == scores.total[G:]
    assert torch.equal(kept.rollout.completion_ids, rollout.completion_ids[rows, :width])
    assert torch.equal(kept.old_logp, logp[rows, :width])
    with torch.no_grad():  # the same log-probabilities without the dropped padding, to rounding
        again = token_logprobs(model, kept.rollout)[0]
    assert torch.allclose(again * kept.mask, logp[rows, :width] * kept.mask, atol=1e-5)

    nothing = batch.select_groups(torch.tensor([False, False, False]))
    assert nothing.rows == [] and len(nothing.rollout.completions) == 0
