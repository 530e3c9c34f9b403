"""Environment classes as TRL 1.16's GRPOTrainer takes them (`environment_factory=`), rollout by rollout.

What TRL does with a class (trl/trainer/grpo_trainer.py, `__init__` and `_generate_and_score_completions`),
and so what happens here:

- one instance per rollout; `reset(**row)` gets the dataset row as it is: its `prompt` (a string
  or TRL's messages) and every other column;
- a string `reset` returns is an observation, appended to the content of the prompt's last
  message (the user's), so the model sees it; None adds nothing;
- its public methods are the tools, `reset` and `get_reward` excepted;
- `get_reward()` (no argument), when the class defines it, is a reward source of its own, named
  after the class, weight 1, beside the configured rewards: it scores each rollout from the state
  the rollout left. It may be `async def` (awaited as an async reward is, grpo_lab/rewards/aio.py).

The trainer's rollout loop is grpo_lab/trainer/multiturn.py; `start` is what it calls per rollout, through
grpo_lab/trainer/environment_setup.py (the trainer's side: its config errors, its prompt rendering).
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

NOT_TOOLS = ("reset", "get_reward")
OURS = ("prompt_id", "source_prompt")  # row fields the trainer adds; TRL's row has neither


def reset_columns(row: dict) -> dict:
    """The row as TRL hands it to `reset`: the dataset's `prompt` (not the rendered text) and the
    other columns.

    >>> reset_columns({"prompt": "<rendered>", "source_prompt": [{"role": "user", "content": "Hi"}],
    ...                "prompt_id": 3, "answer": "4"})
    {'prompt': [{'role': 'user', 'content': 'Hi'}], 'answer': '4'}
    """
    out = {k: v for k, v in row.items() if k not in OURS and k != "prompt"}
    if "prompt" in row or "source_prompt" in row:
        out = {"prompt": row.get("source_prompt", row.get("prompt")), **out}
    return out


def with_observation(prompt: Any, observation: Any) -> Any:
    """The prompt with `reset`'s observation appended, as TRL appends it: to the content of the
    last message (a new list, the row's own untouched); to the text of a plain prompt.

    >>> with_observation([{"role": "user", "content": "Play."}], " Board: X..")
    [{'role': 'user', 'content': 'Play. Board: X..'}]
    >>> with_observation("3+4=", None), with_observation("Go.", "\\nstate: 1")
    ('3+4=', 'Go.\\nstate: 1')
    """
    if observation is None:
        return prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict):
        content = prompt[-1].get("content")
        if isinstance(observation, list) and isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if isinstance(observation, str) and isinstance(content, list):
            observation = [{"type": "text", "text": observation}]
        return prompt[:-1] + [{**prompt[-1], "content": content + observation}]
    return f"{prompt}{observation}"


def tool_names(cls: type) -> list[str]:
    """The methods TRL offers as tools: the class's public functions but reset and get_reward."""
    return [name for name, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
            if not name.startswith("_") and name not in NOT_TOOLS]


def owns_reward(cls: type | None) -> bool:
    """Whether the class defines get_reward (TRL: then the environment is a reward source)."""
    return cls is not None and inspect.isfunction(inspect.getattr_static(cls, "get_reward", None))


def reward_source(cls: type) -> tuple[str, Callable]:
    """(name, reward function) for an environment that owns its reward, as TRL builds it: the class
    name, and a reward that asks each rollout's own instance (the `environments` keyword) for
    get_reward(); an instance of another class scores None.

    >>> class Maze:
    ...     def reset(self, **row): self.steps = 0
    ...     def get_reward(self): return 1.0 - 0.1 * self.steps
    >>> name, fn = reward_source(Maze)
    >>> m = Maze(); m.reset(); name, fn(environments=[m, object()])
    ('Maze', [1.0, None])
    """
    if inspect.iscoroutinefunction(cls.get_reward):
        async def get_reward(environments, **kwargs):
            return [await e.get_reward() if type(e) is cls else None for e in environments]
    else:
        def get_reward(environments, **kwargs):
            return [e.get_reward() if type(e) is cls else None for e in environments]
    get_reward.__name__ = cls.__name__
    get_reward.__qualname__ = f"{cls.__name__}.get_reward"
    return cls.__name__, get_reward


def environment_rewards(cls: type | None, configured: dict) -> dict[str, tuple[Callable, float]]:
    """The reward sources an environment class adds to the run's (`configured`, by name): TRL's
    get_reward source at weight 1, or nothing. A configured reward of the same name keeps its place."""
    if not owns_reward(cls):
        return {}
    name, fn = reward_source(cls)
    if name in configured:
        raise ValueError(f"rewards: {name!r} is both a configured reward and the environment class whose "
                         "get_reward TRL adds under its class name; rename one")
    return {name: (fn, 1.0)}


@dataclass
class Started:
    """One rollout's environment after reset: the instance, the observation reset returned, and the
    prompt text the model starts from."""

    environment: object
    observation: Any
    text: str
    prompt: Any  # the dataset prompt with the observation, as TRL hands rewards their `prompts`


def start(cls: type, row: dict, rendered: str, prompter: Callable[[Any], str] | None = None) -> Started:
    """A fresh instance for one rollout, reset with the row's columns; with an observation, the
    prompt re-rendered with it (`prompter`; without one, the observation follows the rendered text),
    and kept for the rewards of this instance's rollout (`prompts_seen`)."""
    env = cls()
    columns = reset_columns(row)
    observation = env.reset(**columns) if callable(getattr(env, "reset", None)) else None
    source = columns.get("prompt", rendered)
    if observation is None:
        return Started(env, None, rendered, source)
    prompt = with_observation(source, observation)
    text = prompter(prompt) if prompter is not None else with_observation(rendered, observation)
    _remember(env, prompt, text)  # the rewards' `prompts` carry it too (prompts_seen), the samples' text (texts_seen)
    return Started(env, observation, text, prompt)


# id(env) -> (a reference to env, the prompt with its observation, the text the model started from):
# an entry goes with its instance
_SEEN: dict[int, tuple[Callable[[], object], Any, str]] = {}
_SEEN_MAX = 1 << 16


def _remember(env: object, prompt: Any, text: str) -> None:
    if len(_SEEN) >= _SEEN_MAX:  # instances that cannot be weakly referenced: drop the oldest half
        for key in list(_SEEN)[:_SEEN_MAX // 2]:
            _SEEN.pop(key, None)
    try:
        ref = weakref.ref(env, lambda _gone, key=id(env): _SEEN.pop(key, None))
    except TypeError:  # a class with __slots__ and no __weakref__
        ref = lambda env=env: env  # noqa: E731
    _SEEN[id(env)] = (ref, prompt, text)


def prompts_seen(environments: list | None, prompts: list) -> list:
    """The rewards' `prompts`, as TRL hands them: with the observation reset returned, where it
    returned one (the environment instance says which rollout)."""
    return _seen(environments, prompts, 1)


def texts_seen(environments: list | None, texts: list[str]) -> list[str]:
    """The prompt texts the model started from (the samples' `prompt`): re-rendered with the observation
    reset returned, where it returned one; `texts` (the rendered dataset prompts) elsewhere."""
    return _seen(environments, texts, 2)


def _seen(environments: list | None, fallback: list, field: int) -> list:
    if not environments:
        return fallback
    out = []
    for env, value in zip(environments, fallback):
        kept = _SEEN.get(id(env))
        out.append(kept[field] if kept is not None and kept[0]() is env else value)
    return out
