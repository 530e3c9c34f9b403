"""Run several rewards on one batch and combine them; a failing reward never kills the run.

Rewards are called as TRL 1.16's GRPOTrainer calls them (`_calculate_rewards`), by keyword:

    fn(prompts=..., completions=..., completion_ids=..., **columns,
       trainer_state=..., log_extra=..., log_metric=...)

so a function written for TRL runs unchanged. A function whose first two parameters have other
names (`lambda p, c, **kw`) cannot take that call; it is called with prompts and completions by
position instead. One that takes neither call is refused with "called with ...; takes ...".

The rules (also in grpo_lab/rewards/README.md):
- `per_reward[name][i]` is that reward's score for sample i, or None ("no score"): the reward
  said so, raised on that sample, or returned something that is not a finite number.
- `total[i]` is the weighted sum over the rewards that scored sample i; a reward that gave
  None is left out of the sum (it does not count as 0). `total[i]` is None only when no reward
  scored sample i. The trainer turns None into NaN: left out of the group's mean and std, and
  advantage 0 (grpo_lab/objective/functions.py `group_advantages`).
- `log_extra(column, values)` (one value per sample) lands in `extra[column]`; `log_metric(name,
  value)` in `logged[name]`, averaged by `metrics()` as `rewards/log/<name>`.
- An `async def` reward is awaited (aio.py); the async rewards of one batch run at once, as
  TRL's `asyncio.gather` runs them.

>>> def ok(prompts, completions, **kw): return [1.0 for _ in completions]
>>> def picky(prompts, completions, log_extra, **kw):
...     log_extra("why", ["no", "yes"])
...     return [None, 0.5]
>>> s = score_all({"ok": (ok, 1.0), "picky": (picky, 2.0)}, ["a", "b"], ["x", "y"], {})
>>> s.total, s.extra
([1.0, 2.0], {'why': ['no', 'yes']})
"""

from __future__ import annotations

import inspect
import math
import numbers
from dataclasses import dataclass, field
from typing import Callable

from grpo_lab.rewards import aio

# One bad reward on a 64-sample batch would otherwise print 64 near-identical lines per step.
MAX_MESSAGES_PER_REWARD = 5
# The trainer's own arguments (TRL's names); a dataset column of one of these names is not passed.
CALL_ARGS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric")


@dataclass
class Scores:
    total: list[float | None]
    per_reward: dict[str, list[float | None]]
    errors: dict[str, int] = field(default_factory=dict)  # failed samples per reward
    messages: list[str] = field(default_factory=list)  # human-readable, for the run's log
    extra: dict[str, list] = field(default_factory=dict)  # log_extra columns: one value per sample (None: not logged)
    logged: dict[str, list[float]] = field(default_factory=dict)  # log_metric values, in call order
    first_error: dict[str, str] = field(default_factory=dict)  # per reward: its first failure message

    def metrics(self) -> dict[str, float]:
        """Per-step metrics: `reward/mean|std`, `rewards/<name>/mean|std|errors`, `rewards/log/<name>`.

        Means and stds are over the scored samples only (population std); NaN when none scored.
        """
        out = {"reward/mean": _mean(self.total), "reward/std": _std(self.total)}
        for name, values in self.per_reward.items():
            out[f"rewards/{name}/mean"] = _mean(values)
            out[f"rewards/{name}/std"] = _std(values)
            out[f"rewards/{name}/errors"] = float(self.errors.get(name, 0))
        out.update({f"rewards/log/{name}": _mean(values) for name, values in self.logged.items()})
        return out


def score_all(
    rewards: dict[str, tuple[Callable, float]],
    prompts: list,
    completions: list,
    columns: dict[str, list],
    *,
    completion_ids: list[list[int]] | None = None,
    trainer_state=None,
) -> Scores:
    """Score every sample with every reward; see the module docstring for the call and the None rule.

    prompts and completions are strings, or TRL's conversational lists of messages; columns are
    the dataset's columns, one value per sample; trainer_state is what TRL passes (an object
    with `global_step`, `max_steps`, ...), None outside a trainer."""
    n = len(completions)
    per_reward: dict[str, list[float | None]] = {}
    errors: dict[str, int] = {}
    messages: list[str] = []
    first_error: dict[str, str] = {}
    sink = _Sink(n)
    columns = {k: v for k, v in (columns or {}).items() if k not in CALL_ARGS}
    batch = _Inputs(list(prompts), list(completions), completion_ids, columns, trainer_state)
    started = _start_async(rewards, batch, sink, n)  # awaited together, as TRL gathers them
    for name, (fn, _weight) in rewards.items():
        values, failed, lines = _run_one(name, fn, batch, sink, n, started.get(name))
        per_reward[name] = values
        errors[name] = failed
        if lines:
            first_error[name] = lines[0]
        messages.extend(lines[:MAX_MESSAGES_PER_REWARD])
        if len(lines) > MAX_MESSAGES_PER_REWARD:
            more = len(lines) - MAX_MESSAGES_PER_REWARD
            messages.append(f"reward {name!r}: ... and {more} more failures")
        messages.extend(sink.take_problems())
    total = [_weighted_sum(rewards, per_reward, i) for i in range(n)]
    return Scores(total=total, per_reward=per_reward, errors=errors, messages=messages, extra=sink.extra,
                  logged=sink.logged, first_error=first_error)


# --- the call --------------------------------------------------------------------------------


@dataclass
class _Inputs:
    prompts: list
    completions: list
    completion_ids: list | None
    columns: dict[str, list]
    trainer_state: object

    def one(self, i: int) -> "_Inputs":
        return _Inputs([self.prompts[i]], [self.completions[i]],
                       None if self.completion_ids is None else [self.completion_ids[i]],
                       {k: [v[i]] for k, v in self.columns.items()}, self.trainer_state)

    def kwargs(self, log_extra, log_metric) -> dict:
        """TRL's keyword call (trl/trainer/grpo_trainer.py, `_calculate_rewards`)."""
        return {"prompts": self.prompts, "completions": self.completions, "completion_ids": self.completion_ids,
                **self.columns, "trainer_state": self.trainer_state, "log_extra": log_extra,
                "log_metric": log_metric}


def call_reward(fn: Callable, kwargs: dict):
    """fn called with TRL's keywords; positionally (prompts, completions, rest by keyword) when only
    that fits its signature; a TypeError saying "called with ...; takes ..." when neither fits.
    An `async def` reward's coroutine is awaited (aio.resolve): the scores, never a coroutine."""
    return aio.resolve(start_reward(fn, kwargs))


def start_reward(fn: Callable, kwargs: dict):
    """call_reward without the await: an async reward's coroutine, not yet run."""
    problem = call_problem(fn, list(kwargs))
    if problem is None:
        return fn(**kwargs)
    rest = {k: v for k, v in kwargs.items() if k not in ("prompts", "completions")}
    if call_problem(fn, ["prompts", "completions"], list(rest)) is None:
        return fn(kwargs["prompts"], kwargs["completions"], **rest)
    raise SignatureError(problem)


def is_async(fn: Callable) -> bool:
    """An `async def` function, or an object whose __call__ is one (TRL's is_async_callable)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


def _start_async(rewards, batch: "_Inputs", sink: "_Sink", n: int) -> dict:
    """The async rewards' whole-batch calls, started on the reward loop: {name: Future}. A call
    whose signature does not fit is left to _run_one, which reports it."""
    started = {}
    for name, (fn, _weight) in rewards.items():
        if is_async(fn):
            try:
                coroutine = start_reward(fn, batch.kwargs(sink.log_extra(name, 0, n), sink.log_metric_for(name)))
            except Exception:  # noqa: BLE001 - _run_one makes the same call again and reports it
                continue
            started[name] = aio.submit(coroutine)
    return started


class SignatureError(TypeError):
    """The reward's signature does not take the trainer's call: no sample can be scored."""


def call_problem(fn: Callable, names: list[str], keywords: list[str] | None = None) -> str | None:
    """Why `fn` cannot be called with `names` (by keyword; with `keywords`: `names` by position,
    then `keywords`), as one line, or None when the call fits (or fn has no readable signature)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        if keywords is None:
            sig.bind(**dict.fromkeys(names))
        else:
            sig.bind(*[None] * len(names), **dict.fromkeys(keywords))
    except TypeError as exc:
        shown = ", ".join(names if keywords is None else [*names, *keywords])
        return f"{exc}: called with {shown}; takes {takes(sig)}"
    return None


def takes(sig: inspect.Signature) -> str:
    """'(completions, solution, **kwargs)': a signature's parameters without annotations or defaults."""
    marks = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}
    return "(" + ", ".join(marks.get(p.kind, "") + p.name for p in sig.parameters.values()) + ")"


class _Sink:
    """Where log_extra and log_metric put what the rewards log during one score_all."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.extra: dict[str, list] = {}
        self.logged: dict[str, list[float]] = {}
        self.problems: list[str] = []

    def take_problems(self) -> list[str]:
        out, self.problems = self.problems[:MAX_MESSAGES_PER_REWARD], []
        return out

    def log_extra(self, name: str, start: int, size: int) -> Callable:
        """The log_extra of a call that scores samples start .. start + size - 1."""
        def log_extra(column: str, values: list) -> None:
            values = list(values)
            if len(values) != size:
                self.problems.append(f"reward {name!r}: log_extra({column!r}) got {len(values)} values for "
                                     f"{size} samples; not logged")
                return
            kept = self.extra.setdefault(str(column), [None] * self.n)
            kept[start:start + size] = [_extra_value(v) for v in values]
        return log_extra

    def log_metric_for(self, name: str) -> Callable:
        def log_metric(metric: str, value: float) -> None:
            try:
                number = float(value)
            except (TypeError, ValueError):
                self.problems.append(f"reward {name!r}: log_metric({metric!r}) got {value!r}, not a number")
                return
            self.logged.setdefault(str(metric), []).append(number)
        return log_metric


def _extra_value(value):
    """A log_extra value as the samples table stores it: a number (float), text, or None."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, numbers.Real):
        return float(value)
    return str(value)


def _run_one(name, fn, batch: _Inputs, sink: _Sink, n, started=None) -> tuple[list, int, list[str]]:
    """One reward over the batch (`started`: its call already running, an async reward's Future);
    on an exception, retry sample by sample so only the failing samples lose their score.
    Returns (scores, number of failed samples, messages)."""
    try:
        raw = (started.result() if started is not None
               else call_reward(fn, batch.kwargs(sink.log_extra(name, 0, n), sink.log_metric_for(name))))
    except SignatureError as exc:  # no sample can be scored: one message, every sample counted
        return [None] * n, n, [f"reward {name!r} failed on every sample: TypeError: {exc}"]
    except Exception:
        return _run_per_sample(name, fn, batch, sink, n)
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


def _run_per_sample(name, fn, batch: _Inputs, sink: _Sink, n) -> tuple[list, int, list[str]]:
    values, lines = [], []
    for i in range(n):
        try:
            raw = call_reward(fn, batch.one(i).kwargs(sink.log_extra(name, i, 1), sink.log_metric_for(name)))
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
