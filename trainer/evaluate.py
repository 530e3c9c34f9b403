"""Evaluation on held-out prompts: one greedy completion each, scored by the run's rewards.

Logged into the scalars table on the steps it runs (NaN on the others) as `eval/...` metrics;
see docs/run-directory.md ("Evaluation"). Greedy decoding makes the curve a function of the
weights alone, so two evaluations differ only because the policy changed.
"""

from __future__ import annotations

import math
import time

import torch

import rewards
from trainer.rollout import sample

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


@torch.no_grad()
def evaluate(c) -> dict[str, float]:
    """eval/* metrics for the policy as it is now (c: trainer.setup.Components with an eval_task)."""
    cfg = c.cfg
    start = time.perf_counter()
    rows = eval_rows(c.eval_task, cfg.eval_prompts)
    chunk = cfg.prompts_per_step * cfg.group_size  # never a larger generation batch than training uses
    completions, lengths, truncated = [], [], []
    for i in range(0, len(rows), chunk):
        part = rows[i:i + chunk]
        out = sample(c.policy, c.tokenizer, [r["prompt"] for r in part], 1, cfg.max_new_tokens,
                     cfg.temperature, c.device, greedy=True)
        completions += out.completions
        lengths += out.lengths.tolist()
        truncated += out.truncated.tolist()
    prompts = [r["prompt"] for r in rows]
    columns = {k: [r.get(k) for r in rows] for k in rows[0] if k not in ("prompt", "prompt_id")}
    scores = rewards.score_all(c.reward_fns, prompts, completions, columns)
    for message in scores.messages:
        c.log.warning("eval: %s", message)
    accuracy = scores.per_reward.get(ACCURACY_REWARD)
    if accuracy is None and "answer" in columns:  # not trained on it: still the answer check
        accuracy = rewards.score_all({ACCURACY_REWARD: (rewards.build(ACCURACY_REWARD), 1.0)},
                                     prompts, completions, columns).per_reward[ACCURACY_REWARD]
    metrics = {
        "eval/reward_mean": _mean(scores.total),
        "eval/accuracy": _mean(accuracy) if accuracy is not None else math.nan,
        **{f"eval/rewards/{name}/mean": _mean(s) for name, s in scores.per_reward.items()},
        "eval/completion/length_mean": sum(lengths) / len(lengths),
        "eval/completion/truncated_frac": sum(truncated) / len(truncated),
        "eval/prompts": float(len(rows)),
        "eval/time_s": time.perf_counter() - start,
    }
    c.log.info("eval: %d prompts, reward %.3f, accuracy %.3f", len(rows), metrics["eval/reward_mean"],
               metrics["eval/accuracy"])
    return metrics
