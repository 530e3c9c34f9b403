"""Sampling completions and scoring their tokens under a model.

Log-probabilities are always recomputed with one full forward pass (never taken from sampling),
so the first optimisation pass sees exactly the numbers pi_old was computed with: ratio == 1.
Both sampling and scoring run each distinct prompt once: a group's G completions share it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import torch

from grpo_lab.objective import functions as objective
from grpo_lab.trainer.chunked_logprobs import chunked_head, head_logprobs, head_skipped
from grpo_lab.trainer.decode import Sampling, decode_with_logp, position_ids
from grpo_lab.trainer.models import unwrap

__all__ = ["Rollout", "position_ids", "sample", "token_logprobs", "completion_logits"]


@dataclass
class Rollout:
    input_ids: torch.Tensor  # (B, P+T) left-padded prompt, then completion, then padding
    attention_mask: torch.Tensor  # (B, P+T)
    prompt_len: int  # P
    completion_mask: torch.Tensor  # (B, T) 1 up to and including EOS
    truncated: torch.Tensor  # (B,) bool: no EOS within max_new_tokens
    completions: list[str]
    generation_s: float
    # multi-turn rollouts (grpo_lab/trainer/multiturn.py): 1 where a completion token came from a tool
    # (context, not policy: no loss), and each row's turns as the run directory records them
    tool_mask: torch.Tensor | None = None  # (B, T)
    turns: list[list[dict]] | None = None
    environments: list | None = None  # each row's environment instance, for the rewards (TRL's keyword)
    # (B, T) float32: each token's log-prob under the distribution the sampler drew it from (decode.py), 0 after
    # EOS; the training forward recomputes pi_old on its own. None where the sampler gave none (tools, joined rounds)
    sampler_logp: torch.Tensor | None = None

    @property
    def completion_ids(self) -> torch.Tensor:
        return self.input_ids[:, self.prompt_len:]

    @property
    def lengths(self) -> torch.Tensor:
        return self.completion_mask.sum(dim=1)

    def select(self, index: torch.Tensor) -> "Rollout":
        """The rows `index` (a minibatch); prompt_len stays, so shapes line up with the whole."""
        rows = index.tolist()
        return replace(self, input_ids=self.input_ids[index], attention_mask=self.attention_mask[index],
                       completion_mask=self.completion_mask[index], truncated=self.truncated[index],
                       completions=[self.completions[i] for i in rows],
                       tool_mask=None if self.tool_mask is None else self.tool_mask[index],
                       turns=None if self.turns is None else [self.turns[i] for i in rows],
                       environments=None if self.environments is None else [self.environments[i] for i in rows],
                       sampler_logp=None if self.sampler_logp is None else self.sampler_logp[index])

    def trimmed(self) -> "Rollout":
        """Without the columns no row uses: left padding before the longest prompt, completion
        columns past the longest completion (what rows leave behind when others are dropped)."""
        if not len(self.input_ids):
            return self
        start = int(self.attention_mask[:, :self.prompt_len].any(dim=0).long().argmax())
        width = int(self.lengths.max())
        return replace(self, input_ids=self.input_ids[:, start:self.prompt_len + width],
                       attention_mask=self.attention_mask[:, start:self.prompt_len + width],
                       prompt_len=self.prompt_len - start, completion_mask=self.completion_mask[:, :width],
                       tool_mask=None if self.tool_mask is None else self.tool_mask[:, :width],
                       sampler_logp=None if self.sampler_logp is None else self.sampler_logp[:, :width])


def sample(model, tokenizer, prompts: list[str], how: Sampling, device: torch.device) -> Rollout:
    """`how.copies` (G) completions for each prompt; prompt i's completions are rows i*G .. i*G+G-1."""
    start = time.perf_counter()
    group_size, max_new_tokens = how.copies, how.max_new_tokens
    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
    decoded = decode_with_logp(unwrap(model), enc["input_ids"], enc["attention_mask"], how,
                               eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id)
    completion = decoded.tokens
    prompt_ids = enc["input_ids"].repeat_interleave(group_size, dim=0)
    is_eos = completion == tokenizer.eos_token_id
    # mask = 1 up to and including the first EOS
    after_eos = (is_eos.long().cumsum(dim=1) - is_eos.long()) > 0
    completion_mask = (~after_eos).long()
    truncated = ~is_eos.any(dim=1)
    attention_mask = torch.cat([enc["attention_mask"].repeat_interleave(group_size, dim=0), completion_mask], dim=1)
    texts = tokenizer.batch_decode(completion * completion_mask + tokenizer.pad_token_id * (1 - completion_mask),
                                   skip_special_tokens=True)
    return Rollout(input_ids=torch.cat([prompt_ids, completion], dim=1), attention_mask=attention_mask,
                   prompt_len=prompt_ids.shape[1], completion_mask=completion_mask, truncated=truncated,
                   completions=texts, generation_s=time.perf_counter() - start, sampler_logp=decoded.logp)


def _one_forward_per_backward(model) -> bool:
    """A differentiated forward that cannot be split in two: gradient checkpointing drops a layer's
    KV cache (models.py), and FSDP frees the weights the first forward's backward would need."""
    from torch.distributed.fsdp import FSDPModule  # noqa: PLC0415 - torch.distributed is loaded by then

    return torch.is_grad_enabled() and (isinstance(model, FSDPModule) or any(
        getattr(m, "gradient_checkpointing", False) for m in model.modules()))


def completion_logits(model, rollout: Rollout) -> torch.Tensor:
    """The logits that predict each completion token (B, T, V).

    Position p's logits predict token p+1, so the completion's start at the prompt's last token.
    The rows of a group share their prompt: all but its last token run once per distinct prompt,
    with their keys and values indexed out to every row that has it; then each row runs its last
    prompt token and its completion on top. Indexing is differentiable: the prompt's gradient is
    the sum over the rows that share it, what running it once per row gives (to rounding). Under
    DDP the prompt pass runs the plain module (one wrapped forward per backward); with gradient
    checkpointing or FSDP, a differentiated forward runs every row whole.
    """
    P, T = rollout.prompt_len, rollout.completion_mask.shape[1]
    ids, mask = rollout.input_ids, rollout.attention_mask
    pos = position_ids(mask)
    if P > 1 and not _one_forward_per_backward(model):
        prefix = torch.cat([ids[:, :P - 1], mask[:, :P - 1]], dim=1)  # a prompt is its tokens and its padding
        distinct, row_of = torch.unique(prefix, dim=0, return_inverse=True)
        if len(distinct) < len(ids):
            distinct_mask = distinct[:, P - 1:]
            cache = unwrap(model)(input_ids=distinct[:, :P - 1], attention_mask=distinct_mask,
                                  position_ids=position_ids(distinct_mask), use_cache=True,
                                  logits_to_keep=1).past_key_values
            cache.batch_select_indices(row_of)
            return model(input_ids=ids[:, P - 1:-1], attention_mask=mask[:, :-1], position_ids=pos[:, P - 1:-1],
                         past_key_values=cache, use_cache=True).logits
    # the LM head only where it is used: (B, T+1, V) instead of (B, P+T, V)
    return model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=T + 1).logits[:, :-1]


def token_logprobs(model, rollout: Rollout, temperature: float = 1.0, with_entropy: bool = False,
                   entropy_grad: bool = False, chunk_bytes: float | None = None,
                   ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log pi(o_t | q, o_<t) for each completion token (B, T), and optionally its entropy (B, T).

    Logits are divided by the sampling temperature, so the ratio compares the distributions the
    tokens were actually drawn from. entropy_grad: the entropy keeps its graph (an entropy bonus
    in the loss); otherwise it is a number, computed without one.

    Float32 logits (B, T, V) larger than chunk_bytes (None: chunked_logprobs.CHUNK_BYTES) are never
    held whole: the model runs with its LM head passed through, and chunked_logprobs.py takes the
    last hidden states through the head a chunk of tokens at a time, forward and backward (FSDP and
    models that change their head's output keep the whole logits; chunked_head says which).
    chunk_bytes=math.inf: always the whole logits, below.
    """
    head = chunked_head(model, tokens=rollout.completion_mask.numel(), chunk_bytes=chunk_bytes)
    if head is not None:
        with head_skipped(head):
            hidden = completion_logits(model, rollout)  # (B, T, H): what the head would have multiplied
        return head_logprobs(hidden, head, rollout.completion_ids, temperature, with_entropy=with_entropy,
                             entropy_grad=entropy_grad, chunk_bytes=chunk_bytes)
    logits = completion_logits(model, rollout).float() / temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, rollout.completion_ids.unsqueeze(-1)).squeeze(-1)
    entropy = None
    if with_entropy or entropy_grad:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = objective.entropy(logp_all)
    return logp, entropy
