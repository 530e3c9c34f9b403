"""A tool rollout's turns (multiturn.py) as the rewards see them: TRL's messages and the calls made.

TRL 1.16 (`GRPOTrainer._tool_call_loop`) hands a reward of a tool rollout its completion as the
messages of the conversation after the prompt: an assistant message whose `tool_calls` hold the
call (`{"type": "function", "function": {"name", "arguments"}}`, its `content` the text without
the call), a `{"role": "tool", "name", "content"}` message with the result, and so on until the
assistant answers without a call. `messages` builds the same list from our turns, so a TRL reward
that walks the conversation runs unchanged. TRL has no keyword for the calls alone; ours is
`tool_calls` (`calls`), documented in grpo_lab/rewards/README.md.

A tag call (`calc 2+3=`, `<calc>2+3</calc>`) records its one argument under the key "" (the
tool's first parameter, runner._bind); here it gets that parameter's name, as a JSON call names it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from grpo_lab.tools.parsing import JSON_OPEN


def first_parameters(tools: dict[str, Callable], environment: type | None = None) -> dict[str, str]:
    """Each tool's first parameter, by tool name: the name a tag call's one argument goes to.

    >>> def calculator(expression: str) -> str: ...
    >>> class Env:
    ...     def reset(self, **row): ...
    ...     def lookup(self, key: str) -> str: ...
    >>> first_parameters({"calculator": calculator}, Env)
    {'calculator': 'expression', 'lookup': 'key'}
    """
    out = {}
    for name, fn in tools.items():
        params = list(inspect.signature(fn).parameters)
        if params:
            out[name] = params[0]
    if environment is not None:
        for name, member in inspect.getmembers(environment, callable):
            if name.startswith("_") or name == "reset" or inspect.isclass(member) or name in out:
                continue
            params = list(inspect.signature(member).parameters)
            # a plain method read from the class still takes self; a static or class method does not
            if inspect.isfunction(inspect.getattr_static(environment, name)):
                params = params[1:]
            if params:
                out[name] = params[0]
    return out


def _arguments(arguments: dict, name: str, first: dict[str, str]) -> dict:
    if set(arguments) == {""} and name in first:
        return {first[name]: arguments[""]}
    return dict(arguments)


def _before_call(text: str, is_json: bool, openers: tuple[str, ...]) -> str:
    """The turn's text without its closing call (a turn ends where its call closes, multiturn.py)."""
    at = [text.find(o) for o in ((JSON_OPEN,) if is_json else openers)]
    at = [a for a in at if a >= 0]
    return text[:min(at)] if at else text


def calls(turns: list[dict], first: dict[str, str] | None = None) -> list[dict]:
    """The tool calls run in one rollout, in order: name, arguments, result (the text the model
    read), error (None or the message), seconds.

    >>> calls([{"model": "calc 2+3=", "tool": "calculator", "arguments": {"": "2+3"}, "result": "5",
    ...         "seconds": 0.001, "error": None}, {"model": " so 5"}], {"calculator": "expression"})
    [{'name': 'calculator', 'arguments': {'expression': '2+3'}, 'result': '5', 'error': None, 'seconds': 0.001}]
    """
    first = first or {}
    return [{"name": t["tool"], "arguments": _arguments(t.get("arguments") or {}, t["tool"], first),
             "result": t.get("result", ""), "error": t.get("error"), "seconds": t.get("seconds")}
            for t in turns if "tool" in t]


def messages(turns: list[dict], first: dict[str, str] | None = None, openers: tuple[str, ...] = ()) -> list[dict]:
    """One rollout's turns as TRL's completion messages. openers: the tag forms' opening texts
    (a turn's content is its text before the call). A last turn with no text and no call (the
    token budget ended on a tool's result) adds no message, as in TRL.

    >>> turns = [{"model": "I add. calc 2+3=", "tool": "calculator", "arguments": {"": "2+3"}, "result": "5",
    ...           "seconds": 0.0, "error": None}, {"model": " so 5"}]
    >>> for m in messages(turns, {"calculator": "expression"}, ("calc ",)): print(m)
    {'role': 'assistant', 'content': 'I add. ', 'tool_calls': [{'type': 'function', 'function': {'name': 'calculator', 'arguments': {'expression': '2+3'}}}]}
    {'role': 'tool', 'name': 'calculator', 'content': '5'}
    {'role': 'assistant', 'content': ' so 5'}
    """
    first = first or {}
    out: list[dict] = []
    for i, turn in enumerate(turns):
        text = turn.get("model", "")
        if "tool" not in turn:
            if text or i == 0:
                out.append({"role": "assistant", "content": text})
            continue
        name, arguments = turn["tool"], turn.get("arguments") or {}
        out.append({"role": "assistant", "content": _before_call(text, "" not in arguments, openers),
                    "tool_calls": [{"type": "function",
                                    "function": {"name": name, "arguments": _arguments(arguments, name, first)}}]})
        out.append({"role": "tool", "name": name, "content": turn.get("result", "")})
    return out
