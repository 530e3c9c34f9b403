"""Run several rewards on one batch and combine them; a failing reward never kills the run.

The rules (also in grpo_lab/rewards/README.md):
- `per_reward[name][i]` is that reward's score for sample i, or None ("no score"): the reward
  said so, raised on that sample, or returned something that is not a finite number.
- `total[i]` is the weighted sum over the rewards that scored sample i; a reward that gave
  None is left out of the sum (it does not count as 0). `total[i]` is None only when no reward
  scored sample i. The trainer turns None into NaN: left out of the group's mean and std, and
  advantage 0 (grpo_lab/trainer/objective.py `group_advantages`).

>>> def ok(prompts, completions, **kw): return [1.0 for _ in completions]
>>> def picky(prompts, completions, **kw): return [None, 0.5]
>>> s = score_all({"ok": (ok, 1.0), "picky": (picky, 2.0)}, ["a", "b"], ["x", "y"], {})
>>> s.total
[1.0, 2.0]
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Callable

# One bad reward on a 64-sample batch would otherwise print 64 near-identical lines per step.
MAX_MESSAGES_PER_REWARD = 5


@dataclass
class Scores:
    total: list[float | None]
    per_reward: dict[str, list[float | None]]
    errors: dict[str, int] = field(default_factory=dict)  # failed samples per reward
    messages: list[str] = field(default_factory=list)  # human-readable, for the run's log

    def metrics(self) -> dict[str, float]:
        """Per-step metrics: `reward/mean|std` and `rewards/<name>/mean|std|errors`.

        Means and stds are over the scored samples only (population std); NaN when none scored.
        """
        out = {"reward/mean": _mean(self.total), "reward/std": _std(self.total)}
        for name, values in self.per_reward.items():
            out[f"rewards/{name}/mean"] = _mean(values)
            out[f"rewards/{name}/std"] = _std(values)
            out[f"rewards/{name}/errors"] = float(self.errors.get(name, 0))
        return out


def score_all(
    rewards: dict[str, tuple[Callable, float]],
    prompts: list[str],
    completions: list[str],
    columns: dict[str, list],
) -> Scores:
    """Score every sample with every reward; see the module docstring for the None rule."""
    n = len(completions)
    per_reward: dict[str, list[float | None]] = {}
    errors: dict[str, int] = {}
    messages: list[str] = []
    for name, (fn, _weight) in rewards.items():
        values, failed, lines = _run_one(name, fn, prompts, completions, columns or {}, n)
        per_reward[name] = values
        errors[name] = failed
        messages.extend(lines[:MAX_MESSAGES_PER_REWARD])
        if len(lines) > MAX_MESSAGES_PER_REWARD:
            more = len(lines) - MAX_MESSAGES_PER_REWARD
            messages.append(f"reward {name!r}: ... and {more} more failures")
    total = [_weighted_sum(rewards, per_reward, i) for i in range(n)]
    return Scores(total=total, per_reward=per_reward, errors=errors, messages=messages)


def _run_one(name, fn, prompts, completions, columns, n) -> tuple[list, int, list[str]]:
    """One reward over the batch; on an exception, retry sample by sample so only the failing
    samples lose their score. Returns (scores, number of failed samples, messages)."""
    try:
        raw = fn(list(prompts), list(completions), **columns)
    except Exception:
        return _run_per_sample(name, fn, prompts, completions, columns, n)
    if not isinstance(raw, (list, tuple)) or len(raw) != n:
        got = f"{len(raw)} scores" if isinstance(raw, (list, tuple)) else type(raw).__name__
        return [None] * n, n, [f"reward {name!r} returned {got} for {n} samples; all scored None"]
    # a reward may say why a sample has no score: `fn.problems`, {sample index: reason}, set by the call
    reasons = getattr(fn, "problems", None)
    reasons = reasons if isinstance(reasons, dict) else {}
    values, lines = [], []
    for i, value in enumerate(raw):
        score, problem = _as_score(value)
        if score is None and i in reasons:
            problem = str(reasons[i])
        values.append(score)
        if problem:
            lines.append(f"reward {name!r} failed on sample {i}: {problem}")
    return values, len(lines), lines


def _run_per_sample(name, fn, prompts, completions, columns, n) -> tuple[list, int, list[str]]:
    values, lines = [], []
    for i in range(n):
        try:
            one = {key: [column[i]] for key, column in columns.items()}
            raw = fn([prompts[i]], [completions[i]], **one)
            if not isinstance(raw, (list, tuple)) or len(raw) != 1:
                raise TypeError(f"returned {raw!r} for a single sample, expected a 1-element list")
            score, problem = _as_score(raw[0])
        except Exception as exc:
            score, problem = None, f"{type(exc).__name__}: {_one_line(exc)}"
        values.append(score)
        if problem:
            lines.append(f"reward {name!r} failed on sample {i}: {problem}")
    return values, len(lines), lines


def _as_score(value) -> tuple[float | None, str | None]:
    """(score, problem): None is a legal "no score"; anything else must be a finite real."""
    if value is None:
        return None, None
    if isinstance(value, numbers.Real) or hasattr(value, "__float__") and not isinstance(value, str):
        try:
            score = float(value)
        except (TypeError, ValueError) as exc:
            return None, f"score {value!r} is not a number ({exc})"
        if math.isfinite(score):
            return score, None
        return None, f"score {score} is not finite"
    return None, f"score {value!r} is not a number (got {type(value).__name__})"


def _weighted_sum(rewards, per_reward, i) -> float | None:
    scored = [(per_reward[name][i], weight) for name, (_fn, weight) in rewards.items()]
    scored = [(value, weight) for value, weight in scored if value is not None]
    if not scored:
        return None
    return float(sum(value * weight for value, weight in scored))


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


def _mean(values: list[float | None]) -> float:
    scored = [v for v in values if v is not None]
    return sum(scored) / len(scored) if scored else float("nan")


def _std(values: list[float | None]) -> float:
    scored = [v for v in values if v is not None]
    if not scored:
        return float("nan")
    mean = sum(scored) / len(scored)
    return math.sqrt(sum((v - mean) ** 2 for v in scored) / len(scored))
