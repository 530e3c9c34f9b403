"""Score a rollout with the configured rewards; failures become None and a log line, never a crash."""

from __future__ import annotations

import math

import torch

import rewards
from trainer.rollout import Rollout

# Row fields that are not reward inputs.
NOT_COLUMNS = ("prompt", "prompt_id")


def score_rollout(c, rows: list[dict], rollout: Rollout) -> tuple["rewards.Scores", torch.Tensor]:
    """(per-reward scores, total reward per completion as a float tensor with NaN for None)."""
    G = c.cfg.group_size
    prompts = [rows[i // G]["prompt"] for i in range(len(rollout.completions))]
    columns = {
        key: [rows[i // G].get(key) for i in range(len(rollout.completions))]
        for key in rows[0] if key not in NOT_COLUMNS
    }
    scores = rewards.score_all(c.reward_fns, prompts, rollout.completions, columns)
    for message in scores.messages:
        c.log.warning(message)
    totals = torch.tensor([math.nan if t is None else float(t) for t in scores.total], dtype=torch.float32)
    return scores, totals
