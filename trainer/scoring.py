"""Score a rollout with the configured rewards; failures become None and a log line, never a crash."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

import rewards
from trainer.rollout import Rollout, sample, token_logprobs

# Row fields that are not reward inputs.
NOT_COLUMNS = ("prompt", "prompt_id")


def score_completions(c, rows: list[dict], completions: list[str], per_prompt: int, log_prefix: str = "",
                      fns: dict | None = None) -> "rewards.Scores":
    """Score completions that answer each row `per_prompt` times in turn, with `fns` (default: the
    run's rewards); a reward's failure is logged, never raised."""
    of_row = [rows[i // per_prompt] for i in range(len(completions))]
    columns = {key: [row.get(key) for row in of_row] for key in rows[0] if key not in NOT_COLUMNS}
    scores = rewards.score_all(c.reward_fns if fns is None else fns, [row["prompt"] for row in of_row],
                               completions, columns)
    for message in scores.messages:
        c.log.warning("%s%s", log_prefix, message)
    return scores


def score_rollout(c, rows: list[dict], rollout: Rollout) -> tuple["rewards.Scores", torch.Tensor]:
    """(per-reward scores, total reward per completion as a float tensor with NaN for None)."""
    scores = score_completions(c, rows, rollout.completions, c.cfg.group_size)
    totals = torch.tensor([math.nan if t is None else float(t) for t in scores.total], dtype=torch.float32)
    return scores, totals


@dataclass
class Batch:
    """One step's on-policy batch, as both algorithms start from it. Completion i answers rows[i // G]."""

    rows: list[dict]
    group_size: int  # G
    rollout: Rollout
    mask: torch.Tensor  # (B, T) float completion mask
    scores: "rewards.Scores"
    totals: torch.Tensor  # (B,) NaN where unscored
    old_logp: torch.Tensor  # (B, T) log pi_old
    entropy: torch.Tensor  # (B, T)
    ref_logp: torch.Tensor | None  # (B, T); None without a reference model


def collect_batch(c, step: int) -> Batch:
    """Sample G completions per prompt from the current policy (pi_old), score them, and take
    pi_old's and the reference's log-probabilities once, before any update."""
    cfg = c.cfg
    rows = c.task.batch(step, cfg.prompts_per_step, cfg.seed)
    rollout = sample(c.policy, c.tokenizer, [r["prompt"] for r in rows], cfg.group_size, cfg.max_new_tokens,
                     cfg.temperature, c.device)
    scores, totals = score_rollout(c, rows, rollout)
    with torch.no_grad():
        old_logp, entropy = token_logprobs(c.policy, rollout, cfg.temperature, with_entropy=True)
        ref_logp = token_logprobs(c.reference, rollout, cfg.temperature)[0] if c.reference is not None else None
    return Batch(rows=rows, group_size=cfg.group_size, rollout=rollout, mask=rollout.completion_mask.float(),
                 scores=scores, totals=totals, old_logp=old_logp, entropy=entropy, ref_logp=ref_logp)


def minibatch_indices(batch: int, minibatches: int) -> list[torch.Tensor]:
    """Row indices of each minibatch of one pass: the whole batch, or a fresh shuffle cut in pieces."""
    order = torch.randperm(batch) if minibatches > 1 else torch.arange(batch)
    return [chunk for chunk in order.chunk(minibatches) if chunk.numel()]
