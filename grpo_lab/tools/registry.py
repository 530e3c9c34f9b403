"""Tools by name: built-ins, `module:function`, and an environment class whose methods are tools.

As TRL takes them: a tool is a plain function with type hints and a docstring; an environment is
a class, one fresh instance per rollout, whose public methods are the tools (`reset` and
`get_reward` excepted) and whose `reset` receives the row (TRL's `environment_factory`;
environments.py: the row's prompt, the observation reset returns, get_reward as a reward).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from grpo_lab.rewards import import_path
from grpo_lab.tools import environments
from grpo_lab.tools.calculator import calculator
from grpo_lab.tools.python_tool import python

BUILTIN: dict[str, Callable] = {"calculator": calculator, "python": python}


class ToolError(ValueError):
    """A tool or environment spec that cannot be loaded (a config error)."""


def _import(spec: str, what: str):
    """The object `spec` names (rewards/import_path.py), its failure said as option `what`'s."""
    try:
        return import_path.resolve(spec)
    except import_path.ImportPathError as exc:
        if exc.kind == "shape":
            raise ToolError(f"{what}: {spec!r} is not module:name (built-in tools: {', '.join(BUILTIN)})") from None
        if exc.kind == "import":
            raise ToolError(f"{what}: cannot import {exc.module!r} ({exc.cause})") from None
        raise ToolError(f"{what}: module {exc.module!r} has no {exc.attr!r}") from None


def load_tools(spec: str) -> dict[str, Callable]:
    """Tools from a comma list of built-in names and module:function specs, by function name.

    >>> list(load_tools("calculator"))
    ['calculator']
    """
    tools: dict[str, Callable] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        fn = BUILTIN.get(part) or _import(part, "tools")
        if not callable(fn):
            raise ToolError(f"tools: {part!r} is not a function")
        tools[fn.__name__] = fn
    return tools


def load_environment(spec: str) -> type:
    """The environment class named module:Class."""
    cls = _import(spec, "environment")
    if not inspect.isclass(cls):
        raise ToolError(f"environment: {spec!r} is not a class")
    if not environment_tools(cls) and not environments.owns_reward(cls):
        raise ToolError(f"environment: {spec!r} has no public methods to use as tools, and no get_reward")
    return cls


def environment_tools(obj) -> dict[str, Callable]:
    """The public methods of an environment (class or instance), reset and get_reward excepted:
    get_reward scores the rollout (environments.reward_source), it is not offered to the model."""
    return {name: getattr(obj, name) for name, member in inspect.getmembers(obj, callable)
            if not name.startswith("_") and name not in environments.NOT_TOOLS and not inspect.isclass(member)}


def template_tools(setup) -> list[Callable]:
    """The functions a chat template describes to the model (its tools=...) for a run's tool set-up
    (trainer/multiturn.py's ToolSetup: `tools`, `environment`): the shared tools and
    the methods of one environment instance (bound, so `self` is not a parameter), as TRL does."""
    if setup is None:
        return []
    fns = list(setup.tools.values())
    if setup.environment is not None:
        fns += [fn for name, fn in environment_tools(setup.environment()).items() if name not in setup.tools]
    return fns


def new_environment(cls: type, row: dict) -> object:
    """A fresh instance for one rollout, reset with the row as TRL passes it (environments.start:
    with the observation reset returns)."""
    return environments.start(cls, row, "").environment
