"""Stages 1 and 2 repeated: DAPO's dynamic sampling (Yu et al., "DAPO", 2025, arXiv:2503.14476, section 3.2).

A group whose rewards are all equal has advantages 0: it costs its sampling and teaches nothing.
Such groups are dropped, and more prompts sampled and scored in their place, before the step goes
on to advantages and log-probabilities with the groups that have a spread.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from grpo_lab.objective.functions import group_advantages
from grpo_lab.trainer.batch import Batch, concat_batches, join_scores
from grpo_lab.trainer.sampling import sample_groups
from grpo_lab.trainer.scoring import score
from grpo_lab.trainer.step_result import first_notes

if TYPE_CHECKING:  # the type alone: Components is built by run.py's prepare
    from grpo_lab.trainer.components import Components


@dataclass
class DynamicBatch:
    """What dynamic sampling collected in one step."""

    kept: Batch  # the groups with a spread (at most prompts_per_step); log-probabilities not yet taken
    dropped: Batch  # the groups whose rewards were all equal, in the order sampled (no log-probabilities)
    sampled: Batch  # every group sampled: kept first, then dropped (for the per-completion scalars)
    rounds: int  # sampling rounds: 1 + extra rounds


def extra_prompts(task, step: int, round_no: int, n: int, seed: int, seen: set[str]) -> list[dict]:
    """n more prompts for round `round_no` (from 1) of dynamic sampling at `step`: a seeded shuffle
    of (seed, step, round), so a resumed run draws the same ones; prompts not yet drawn this step
    first, repeats only when the task runs out."""
    order = list(range(len(task.rows)))
    random.Random(f"{seed}/dynamic/{step}/{round_no}").shuffle(order)
    fresh = [task.rows[i] for i in order if str(task.rows[i]["prompt_id"]) not in seen]
    return (fresh + [task.rows[i] for i in order])[:n]


def collect_with_signal(c: Components, step: int) -> DynamicBatch:
    """Sample and score until `prompts_per_step` groups have a spread, or `dynamic_sampling_rounds`
    extra rounds have been sampled; the step then trains on the groups with a spread it has
    (possibly none: no update). Each extra round draws only as many prompts as are missing, so no
    group with a spread is ever thrown away."""
    cfg = c.cfg
    rows = c.task.batch(step, cfg.prompts_per_step, cfg.seed)
    kept, dropped, seen, rounds, errors, rounds_scores = [], [], set(), 0, {}, []
    while rows:
        got = score(c, sample_groups(c, rows), step)
        rounds += 1
        rounds_scores.append(got.scores)
        seen |= {str(r["prompt_id"]) for r in rows}
        no_signal = group_advantages(got.totals.view(-1, cfg.group_size)).zero_std
        kept.append(got.select_groups(~no_signal))
        dropped.append(got.select_groups(no_signal))
        errors = {k: errors.get(k, 0) + n for k, n in got.scores.errors.items()}
        missing = cfg.prompts_per_step - sum(len(k.rows) for k in kept)
        if missing == 0 or rounds > cfg.dynamic_sampling_rounds:
            break
        rows = extra_prompts(c.task, step, rounds, missing, cfg.seed, seen)
    pad_id = c.tokenizer.pad_token_id or 0
    kept_batch, dropped_batch = concat_batches(kept, pad_id), concat_batches(dropped, pad_id)
    sampled = concat_batches([kept_batch, dropped_batch], pad_id)
    # failures and logged metrics counted per round: once each, wherever its group went; each reward's
    # first failure message is the earliest round's (as the doctor reports it)
    logged = join_scores(rounds_scores, [len(s.total) for s in rounds_scores]).logged
    notes = first_notes(*(s.first_error for s in rounds_scores))
    sampled = replace(sampled, scores=replace(sampled.scores, errors=errors, logged=logged, first_error=notes))
    return DynamicBatch(kept=kept_batch, dropped=dropped_batch, sampled=sampled, rounds=rounds)
