"""Evaluation on held-out prompts: one greedy completion each, scored by the run's rewards.

Logged into the scalars table on the steps it runs (NaN on the others) as `eval/...` metrics;
see docs/run-directory.md ("Evaluation"). Greedy decoding makes the curve a function of the
weights alone, so two evaluations differ only because the policy changed.
"""

from __future__ import annotations

import functools
import math
import time
from typing import TYPE_CHECKING

import torch

from grpo_lab import rewards
from grpo_lab.rundir.metrics import named
from grpo_lab.trainer import multiturn
from grpo_lab.trainer.decode import Sampling
from grpo_lab.trainer.rollout import sample
from grpo_lab.trainer.scoring import completion_id_lists, score_completions
from grpo_lab.trainer.step_result import first_notes

if TYPE_CHECKING:  # the type alone: Components is built by run.py's prepare
    from grpo_lab.trainer.components import Components

ACCURACY_REWARD = "correctness"


def due(step: int, every: int, last: int) -> bool:
    """Evaluate after step 1 (close to the starting policy), every `every` steps, and the last step."""
    return every > 0 and (step == 1 or step % every == 0 or step == last)


def eval_rows(task, n: int) -> list[dict]:
    """The same prompts every time: the first n of the held-out task (0: all)."""
    return task.rows if n == 0 else task.rows[:n]


def _mean(values: list[float | None]) -> float:
    scored = [v for v in values if v is not None]
    return sum(scored) / len(scored) if scored else math.nan


@functools.cache
def _accuracy_reward():
    return rewards.build(ACCURACY_REWARD)  # once per process, not once per evaluation


@torch.no_grad()
def evaluate(c: Components, step: int) -> tuple[dict[str, float], dict[str, str]]:
    """eval/* metrics for the policy as it is after `step` (c: trainer.components.Components with an
    eval_task), and each reward's first failure message (for the run doctor, as the step's own)."""
    cfg = c.cfg
    start = time.perf_counter()
    rows = eval_rows(c.eval_task, cfg.eval_prompts)
    chunk = cfg.prompts_per_step * cfg.group_size  # never a larger generation batch than training uses
    tools = multiturn.setup_for(c)  # a run with tools is evaluated with them, as it samples in training
    completions, ids, lengths, truncated, turns, environments = [], [], [], [], [], []
    for i in range(0, len(rows), chunk):
        part = rows[i:i + chunk]
        how = Sampling(copies=1, max_new_tokens=cfg.max_new_tokens, greedy=True, synced=c.dist.sharded,
                       decode=cfg.decode)
        prompts = [r["prompt"] for r in part]
        out = (sample(c.policy, c.tokenizer, prompts, how, c.device) if tools is None else
               multiturn.sample_with_tools(c.policy, c.tokenizer, prompts, how, c.device, tools, part))
        completions += out.completions
        ids += completion_id_lists(out)
        lengths += out.lengths.tolist()
        truncated += out.truncated.tolist()
        turns += out.turns or []
        environments += out.environments or []
    scores = score_completions(c, rows, completions, 1, "eval: ", completion_ids=ids, step=step,
                               turns=turns if tools else None, environments=environments or None)
    notes = scores.first_error
    accuracy = scores.per_reward.get(ACCURACY_REWARD)
    if accuracy is None and "answer" in rows[0]:  # not trained on it: still the answer check
        checked = score_completions(c, rows, completions, 1, "eval: ", {ACCURACY_REWARD: (_accuracy_reward(), 1.0)},
                                    completion_ids=ids, step=step, turns=turns if tools else None)
        accuracy, notes = checked.per_reward[ACCURACY_REWARD], first_notes(notes, checked.first_error)
    metrics = {
        named("eval/reward_mean"): _mean(scores.total),
        named("eval/accuracy"): _mean(accuracy) if accuracy is not None else math.nan,
        **{named("eval/rewards/<fn>/mean", name): _mean(s) for name, s in scores.per_reward.items()},
        named("eval/completion/length_mean"): sum(lengths) / len(lengths),
        named("eval/completion/truncated_frac"): sum(truncated) / len(truncated),
        named("eval/prompts"): float(len(rows)),
        named("eval/time_s"): time.perf_counter() - start,
    }
    if tools is not None:
        metrics[named("eval/tools/calls_per_rollout")] = sum(sum("tool" in turn for turn in t) for t in turns) / len(turns)
    c.log.info("eval: %d prompts, reward %.3f, accuracy %.3f", len(rows), metrics[named("eval/reward_mean")],
               metrics[named("eval/accuracy")])
    return metrics, notes
