"""Reward lookup: a registry name, or a user function named by import path.

Every registered name maps to a *factory*: `factory(**params) -> reward`, where a reward is
`f(prompts, completions, **columns) -> list[float | None]`. Factories live behind
"module:attribute" strings so that `import rewards` stays light: asking for `available()`
must not pull in torch and transformers (the dashboard's launch form calls it).

>>> fn = build("length", max_len=5)
>>> fn(["q"], ["short", "much too long"])
[0.0, -0.08]
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable

from grpo_lab.rewards import import_path

Reward = Callable[..., list]

_REGISTRY: dict[str, str] = {
    "correctness": "grpo_lab.rewards.correctness:correctness_reward",
    "format": "grpo_lab.rewards.rules:format_reward",
    "length": "grpo_lab.rewards.rules:length_reward",
    "keywords": "grpo_lab.rewards.rules:keywords_reward",
    "repetition": "grpo_lab.rewards.rules:repetition_reward",
    "code_tests": "grpo_lab.rewards.code_tests:code_tests_reward",
    "reward_model": "grpo_lab.rewards.reward_model:reward_model_reward",
    "human_feedback": "grpo_lab.rewards.human_feedback:human_feedback_reward",
    "human": "grpo_lab.rewards.human:human_reward",
}

# Registered rewards that read a dataset column, and the column each reads unless its `column` parameter
# says otherwise (their factories' default; the trainer and a rescore check the data holds it).
READS_COLUMN = {"correctness": "answer", "code_tests": "tests"}


# The values a registered reward returns whatever its parameters (None: no bound on that side); rewards
# not here (and `module:function` ones) have no known range. Compare keeps a band of `reward/mean` inside
# the weighted sum of these (reward_range).
RANGES: dict[str, tuple[float | None, float | None]] = {
    "correctness": (0.0, 1.0), "format": (0.0, 1.0), "code_tests": (0.0, 1.0),  # a share of tests passed
}


def reward_range(weights: dict[str, float]) -> tuple[float | None, float | None]:
    """The range of a weighted sum of rewards: (lowest, highest), None on a side that some reward leaves
    open (an unregistered reward: both).

    >>> reward_range({"correctness": 1.0, "length": 0.1}), reward_range({"correctness": 1.0, "format": 0.5})
    ((None, None), (0.0, 1.5))
    >>> reward_range({"correctness": -1.0}), reward_range({"my.mod:fn": 1.0})
    ((-1.0, 0.0), (None, None))
    """
    low: float | None = 0.0
    high: float | None = 0.0
    for name, weight in weights.items():
        lo, hi = RANGES.get(name, (None, None))
        if weight < 0:
            lo, hi = hi, lo
        lo = None if lo is None else lo * weight
        hi = None if hi is None else hi * weight
        low = None if low is None or lo is None else low + lo
        high = None if high is None or hi is None else high + hi
    return low, high


def available() -> list[str]:
    """The registered reward names, sorted."""
    return sorted(_REGISTRY)


def check_name(name: str) -> None:
    """A ValueError unless `name` is registered or names a function (module:function); imports nothing."""
    if ":" not in name and name not in _REGISTRY:
        raise ValueError(
            f"unknown reward {name!r}; registered rewards: {', '.join(available())}"
            " (or name a function as 'package.module:function')"
        )


def build(name: str, **params) -> Reward:
    """A configured reward: a registry name, or `package.module:function` for a user function.

    A user function is returned as is (its params bound with functools.partial), so a TRL
    reward function works unchanged; a factory (`is_factory`) is called with the params and
    its result is the reward. Every mistake is a one-line ValueError a user can act on.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"reward name must be a non-empty string, got {name!r}")
    if ":" in name:
        return _build_user_function(name, params)
    check_name(name)
    factory = _resolve(_REGISTRY[name], name)
    _check_params(name, factory, params, require=True)
    reward = factory(**params)
    reward.__name__ = name  # TRL logs a reward under its __name__
    return reward


def _build_user_function(path: str, params: dict) -> Reward:
    fn = _resolve(path, path)
    if not callable(fn):
        raise ValueError(f"reward {path!r} is not callable (got {type(fn).__name__})")
    if is_factory(fn):
        return _call_factory(path, fn, params)
    if not params:
        return fn
    _check_params(path, fn, params)
    bound = functools.partial(fn, **params)
    bound.__name__ = getattr(fn, "__name__", path)
    return bound


# What the trainer passes a reward (TRL's names); a callable that takes none of them is a factory.
REWARD_INPUTS = ("prompts", "completions", "completion_ids")
# ... nor one of these: a reward with a misspelt input (`completion`) is a reward the dry run refuses
# with its signature, not a factory missing a parameter
REWARD_LIKE = (*REWARD_INPUTS, "prompt", "completion", "trainer_state", "log_extra", "log_metric")


def is_factory(fn) -> bool:
    """A factory returns the reward (TRL's `get_cosine_scaled_reward(max_len)`): a callable that
    takes none of the reward's inputs and no **kwargs, so it could not score anything itself.

    >>> def make(max_len): return lambda completions, **kw: [0.0] * len(completions)
    >>> is_factory(make), is_factory(lambda completions, **kw: [])
    (True, False)
    """
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    kinds = [p.kind for p in sig.parameters.values()]
    if inspect.Parameter.VAR_KEYWORD in kinds or inspect.Parameter.VAR_POSITIONAL in kinds:
        return False
    return not any(name in sig.parameters for name in REWARD_LIKE)


def _call_factory(path: str, factory, params: dict) -> Reward:
    try:
        _check_params(path, factory, params, require=True)
    except ValueError as exc:
        raise ValueError(f"{exc} (it takes none of {', '.join(REWARD_INPUTS)} or **kwargs, so it is called once "
                         "as a factory of the reward, with its reward_params)") from None
    try:
        reward = factory(**params)
    except Exception as exc:  # noqa: BLE001 - a factory's own check (TRL's max_penalty > 0): one line
        raise ValueError(f"reward {path!r}: the factory raised {type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:200]}") from None
    if not callable(reward):
        raise ValueError(f"reward {path!r} takes none of {', '.join(REWARD_INPUTS)} or **kwargs, so it was called "
                         f"as a factory, and returned {type(reward).__name__}, not a reward function")
    return reward


def _resolve(path: str, label: str):
    """The object `path` names (rewards/import_path.py), its failure said as the reward `label`'s."""
    try:
        return import_path.resolve(path)
    except import_path.ImportPathError as exc:
        if exc.kind == "shape":
            raise ValueError(f"reward {label!r}: an import path must look like 'package.module:function'") from None
        if exc.kind == "import":
            raise ValueError(f"reward {label!r}: cannot import module {exc.module!r} "
                             f"({type(exc.cause).__name__}: {exc.cause})") from exc.cause
        raise ValueError(f"reward {label!r}: module {exc.module!r} has no attribute {exc.attr!r}") from None


def _check_params(label: str, fn, params: dict, require: bool = False) -> None:
    # Validate at the edge: a typo in a config should fail at launch, not on step 1.
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins without a signature: let the call decide
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return
    accepted = [
        p.name for p in sig.parameters.values() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ValueError(
            f"reward {label!r}: unknown parameter(s) {', '.join(unknown)};"
            f" accepted: {', '.join(accepted) or '(none)'}"
        )
    needed = [p.name for p in sig.parameters.values() if p.default is p.empty and p.name in accepted]
    missing = [p for p in needed if p not in params]
    if require and missing:
        raise ValueError(f"reward {label!r}: missing required parameter(s) {', '.join(missing)}")
