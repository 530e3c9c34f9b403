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

The trainer's rollout loop is grpo_lab/trainer/multiturn.py; `start` is what it calls per rollout.
"""

from __future__ import annotations

import dataclasses
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


@dataclass(frozen=True)
class Prompter:
    """Renders a dataset prompt as the trainer gives it to the model (tasks.render: system prompt,
    chat template, tool descriptions), for a rollout whose environment added an observation."""

    tokenizer: Any
    chat_template: str
    system_prompt: str
    task_system: str
    tools: tuple = ()

    def __call__(self, prompt: Any) -> str:
        from grpo_lab.trainer.tasks import Task, render  # noqa: PLC0415 - the trainer imports this package

        task = Task("environment", [{"prompt": prompt, "prompt_id": 0}], system=self.task_system)
        return render(task, self.tokenizer, self.chat_template, self.system_prompt, list(self.tools)).rows[0]["prompt"]


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


# --- what the trainer calls (grpo_lab/trainer/setup.py, multiturn.py, scoring.py) -----------------------


def source_name(environment_spec: str) -> str | None:
    """The name the environment's get_reward scores under (its class's, as in TRL), which config.json
    lists among the run's rewards at weight 1; None without an environment or without get_reward.
    A ConfigError (one line) when the class does not load."""
    from grpo_lab.tools.registry import ToolError, load_environment  # noqa: PLC0415
    from grpo_lab.trainer.config import ConfigError  # noqa: PLC0415

    if not environment_spec:
        return None
    try:
        cls = load_environment(environment_spec)
    except ToolError as exc:
        raise ConfigError(str(exc)) from None
    return cls.__name__ if owns_reward(cls) else None


def run_rewards(environment_spec: str, configured: dict, listed: float | None = None
                ) -> dict[str, tuple[Callable, float]]:
    """The reward sources `--environment` adds to the configured ones (TRL's get_reward source, or
    none); a ConfigError (one line) when the run would have no reward at all. `listed`: the weight
    the run's rewards give the source by its name (config.json lists it; a resumed run reads it
    back): TRL's 1, or a one-line refusal."""
    from grpo_lab.tools.registry import ToolError, load_environment  # noqa: PLC0415
    from grpo_lab.trainer.config import ConfigError  # noqa: PLC0415

    if not environment_spec:
        return {}
    try:
        added = environment_rewards(load_environment(environment_spec), configured)
    except (ToolError, ValueError) as exc:
        raise ConfigError(str(exc)) from None
    if added and listed not in (None, 1.0):
        raise ConfigError(f"rewards: {next(iter(added))} is the environment's get_reward, which scores at weight 1 "
                          f"(as in TRL); got {listed:g}")
    if not configured and not added:
        raise ConfigError(f"rewards: none given, and environment {environment_spec} has no get_reward to score "
                          "with; name a reward with --rewards")
    return added


def start_rollouts(setup, rows: list[dict] | None, prompts: list[str], copies: int
                   ) -> tuple[list[str], list[dict], list | None]:
    """Each rollout's prompt text, toolbox and environment instance (None without a class), rollout
    i answering prompts[i // copies]: a fresh instance per rollout, reset with its row; a rollout
    whose reset returned an observation starts from the prompt re-rendered with it (`setup.prompter`)."""
    from grpo_lab.tools.registry import environment_tools  # noqa: PLC0415

    B = len(prompts) * copies
    if setup.environment is None:
        return [prompts[i // copies] for i in range(B)], [setup.tools] * B, None
    texts, boxes, envs = [], [], []
    for i in range(B):
        row = rows[i // copies] if rows else {"prompt": prompts[i // copies]}
        started = start(setup.environment, row, prompts[i // copies], getattr(setup, "prompter", None))
        texts.append(started.text)
        boxes.append(setup.tools | environment_tools(started.environment))
        envs.append(started.environment)
    return texts, boxes, envs


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


def with_prompter(setup, c):
    """The run's ToolSetup with its Prompter (the trainer components `c`: tokenizer, config, task),
    so an observation is rendered into the prompt as the task's prompts were."""
    if setup is None or setup.environment is None:
        return setup
    from grpo_lab.trainer.multiturn import template_tools  # noqa: PLC0415 - the trainer imports this package

    prompter = Prompter(c.tokenizer, c.cfg.chat_template, c.cfg.system_prompt, c.task.system,
                        tuple(template_tools(setup)))
    return dataclasses.replace(setup, prompter=prompter)
