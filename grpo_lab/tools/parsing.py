"""Finding a tool call in the model's text.

Two forms:
- JSON, as chat templates with tools ask for it (Qwen, SmolLM3, Hermes):
  `<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}</tool_call>`.
- A tag for one tool, for models without a chat template. `<calc>12345+67890</calc>` calls the
  calculator with that text as its one argument. The built-in character model has no `<` or `>`
  in its vocabulary, so its tag is `calc 12345+67890=` (CHARACTER_CALC): the `=` closes the call
  and the tool's result follows it, as a person writes "12345+67890=80235".

A call counts once its closing text has been generated: generation stops there, the tool runs,
and its result is appended before the model continues.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict = field(default_factory=dict)
    end: int = 0  # index in the text just after the call's closing text
    error: str | None = None  # why the call could not be read (the model is told)


@dataclass(frozen=True)
class TagSyntax:
    """`open` + one argument + `close` calls `tool` with that argument as its first parameter."""

    open: str
    close: str
    tool: str = "calculator"


XML_CALC = TagSyntax("<calc>", "</calc>", "calculator")
CHARACTER_CALC = TagSyntax("calc ", "=", "calculator")
JSON_OPEN, JSON_CLOSE = "<tool_call>", "</tool_call>"


def _json_call(text: str) -> ToolCall | None:
    start = text.find(JSON_OPEN)
    stop = text.find(JSON_CLOSE, start + len(JSON_OPEN)) if start >= 0 else -1
    if stop < 0:
        return None
    end = stop + len(JSON_CLOSE)
    body = text[start + len(JSON_OPEN):stop].strip()
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        return ToolCall("", {}, end, f"tool call is not JSON ({exc.msg})")
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return ToolCall("", {}, end, 'tool call needs {"name": ..., "arguments": {...}}')
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):  # some templates write the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return ToolCall(data["name"], {}, end, "tool call arguments are not JSON")
    if not isinstance(arguments, dict):
        return ToolCall(data["name"], {}, end, "tool call arguments must be an object")
    return ToolCall(data["name"], arguments, end)


def _tag_call(text: str, tag: TagSyntax) -> ToolCall | None:
    match = re.search(re.escape(tag.open) + "(.*?)" + re.escape(tag.close), text, flags=re.DOTALL)
    if match is None:
        return None
    return ToolCall(tag.tool, {"": match.group(1)}, match.end())  # "": the tool's first parameter


def find_call(text: str, tags: tuple[TagSyntax, ...] = (XML_CALC,)) -> ToolCall | None:
    """The first complete tool call in `text` (the one that closes earliest), or None.

    >>> find_call('sum: <tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}</tool_call>')
    ToolCall(name='calculator', arguments={'expression': '2+2'}, end=86, error=None)
    >>> find_call("calc 12+30= so", (CHARACTER_CALC,))
    ToolCall(name='calculator', arguments={'': '12+30'}, end=11, error=None)
    >>> find_call("<calc>12+30") is None
    True
    """
    calls = [c for c in [_json_call(text), *(_tag_call(text, t) for t in tags)] if c is not None]
    return min(calls, key=lambda c: c.end, default=None)
