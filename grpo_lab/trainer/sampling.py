"""Stage 1 of a step: the step's prompts, and G completions of each from the current policy (pi_old).

Plain sampling is rollout.sample; a run with tools (or an environment) samples multi-turn, each
completion calling tools as it goes (multiturn.sample_with_tools). Either way the result is a
`Sampled`: the prompt rows and their rollout, completion i answering rows[i // G].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from grpo_lab.trainer import multiturn
from grpo_lab.trainer.decode import Sampling
from grpo_lab.trainer.rollout import Rollout, sample

if TYPE_CHECKING:  # the type alone: Components is built by run.py's prepare
    from grpo_lab.trainer.components import Components


@dataclass
class Sampled:
    """What sampling hands to scoring: each prompt row, and G completions of each in turn."""

    rows: list[dict]
    rollout: Rollout


def step_prompts(c: Components, step: int) -> list[dict]:
    """The step's prompts (the task's seeded draw); with several processes, this process's share."""
    return c.dist.share(c.task.batch(step, c.cfg.prompts_per_step, c.cfg.seed))


def sample_groups(c: Components, rows: list[dict]) -> Sampled:
    """G completions of each row from the current policy, with the run's tools when it has them."""
    cfg = c.cfg
    with c.timer.phase("generation"):
        how = Sampling(copies=cfg.group_size, max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
                       synced=c.dist.sharded, decode=cfg.decode)
        tools = multiturn.setup_for(c)
        prompts = [r["prompt"] for r in rows]
        rollout = (sample(c.policy, c.tokenizer, prompts, how, c.device) if tools is None else
                   multiturn.sample_with_tools(c.policy, c.tokenizer, prompts, how, c.device, tools, rows))
    c.timer.count("generation", rollout.completion_mask.sum())
    return Sampled(rows=rows, rollout=rollout)
