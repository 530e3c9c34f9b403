"""Sampling completions and scoring their tokens under a model.

Log-probabilities are always recomputed with one full forward pass (never taken from generation),
so the first optimisation pass sees exactly the numbers pi_old was computed with: ratio == 1.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from grpo_lab.trainer import objective


@dataclass
class Rollout:
    input_ids: torch.Tensor  # (B, P+T) left-padded prompt, then completion, then padding
    attention_mask: torch.Tensor  # (B, P+T)
    prompt_len: int  # P
    completion_mask: torch.Tensor  # (B, T) 1 up to and including EOS
    truncated: torch.Tensor  # (B,) bool: no EOS within max_new_tokens
    completions: list[str]
    generation_s: float

    @property
    def completion_ids(self) -> torch.Tensor:
        return self.input_ids[:, self.prompt_len:]

    @property
    def lengths(self) -> torch.Tensor:
        return self.completion_mask.sum(dim=1)

    def select(self, index: torch.Tensor) -> "Rollout":
        """The rows `index` (a minibatch); prompt_len stays, so shapes line up with the whole."""
        return Rollout(self.input_ids[index], self.attention_mask[index], self.prompt_len,
                       self.completion_mask[index], self.truncated[index],
                       [self.completions[i] for i in index.tolist()], self.generation_s)


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that skip left padding, as generation uses them."""
    pos = attention_mask.long().cumsum(dim=-1) - 1
    return pos.clamp(min=0)


@torch.no_grad()
def sample(model, tokenizer, prompts: list[str], group_size: int, max_new_tokens: int,
           temperature: float, device: torch.device, greedy: bool = False) -> Rollout:
    """G completions for each prompt; prompt i's completions are rows i*G .. i*G+G-1.

    greedy: the most likely token each time (evaluation), instead of sampling at `temperature`.
    """
    start = time.perf_counter()
    expanded = [p for p in prompts for _ in range(group_size)]
    enc = tokenizer(expanded, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
    # top_k 0, top_p 1: sample the full distribution: the ratio's denominator is the policy itself
    decoding = dict(do_sample=False) if greedy else dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0)
    out = model.generate(
        input_ids=enc["input_ids"],
        attention_mask=enc["attention_mask"],
        **decoding,
        max_new_tokens=max_new_tokens,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    prompt_len = enc["input_ids"].shape[1]
    completion = out[:, prompt_len:]
    is_eos = completion == tokenizer.eos_token_id
    # mask = 1 up to and including the first EOS
    after_eos = (is_eos.long().cumsum(dim=1) - is_eos.long()) > 0
    completion_mask = (~after_eos).long()
    truncated = ~is_eos.any(dim=1)
    attention_mask = torch.cat([enc["attention_mask"], completion_mask], dim=1)
    texts = tokenizer.batch_decode(completion * completion_mask + tokenizer.pad_token_id * (1 - completion_mask),
                                   skip_special_tokens=True)
    return Rollout(out, attention_mask, prompt_len, completion_mask, truncated, texts,
                   time.perf_counter() - start)


def token_logprobs(model, rollout: Rollout, temperature: float = 1.0, with_entropy: bool = False,
                   entropy_grad: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log pi(o_t | q, o_<t) for each completion token (B, T), and optionally its entropy (B, T).

    Logits are divided by the sampling temperature, so the ratio compares the distributions the
    tokens were actually drawn from. entropy_grad: the entropy keeps its graph (an entropy bonus
    in the loss); otherwise it is a number, computed without one.
    """
    completion_len = rollout.input_ids.shape[1] - rollout.prompt_len
    logits = model(
        input_ids=rollout.input_ids,
        attention_mask=rollout.attention_mask,
        position_ids=position_ids(rollout.attention_mask),
        # the LM head only where it is used: (B, T+1, V) instead of (B, P+T, V)
        logits_to_keep=completion_len + 1,
    ).logits
    # logits at position p predict token p+1: the completion's logits start one before it
    logits = logits[:, :-1].float() / temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, rollout.completion_ids.unsqueeze(-1)).squeeze(-1)
    entropy = None
    if with_entropy or entropy_grad:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = objective.entropy(logp_all)
    return logp, entropy
