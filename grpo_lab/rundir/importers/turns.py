"""A TRL tool rollout's logged messages as the samples table's turns (docs/run-directory.md).

TRL 1.16 logs a completion of a run with `tools` or `environment_factory` as the messages its tool
loop built (`GRPOTrainer._tool_call_loop`): an assistant message whose `tool_calls` hold
`{"type": "function", "function": {"name", "arguments"}}` (several calls may share one message),
then one `{"role": "tool", "name", "content"}` message per call, in order, and so on up to the
final answer. A tool that raised has content `str({"error": message})`. The native trainer writes
one call per turn, so here a message with k calls becomes k turns (the message's text on the first).

What TRL does not log is absent: `seconds` is null. Read back from Parquet, a completion's
messages share one struct type, so a missing field reads as null: a null argument is dropped
(it stands for another tool's parameter). A call whose result TRL dropped (its tokens would pass
max_completion_length) keeps `result` "".
"""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

MAX_TURNS = 1000  # per completion: more is taken for a broken file (the Groups page lists each turn)
MAX_ERROR_LITERAL = 10_000  # characters of a "{'error': ...}" content read back as an error


def plain(value: Any) -> Any:
    """numpy arrays (as pandas reads Parquet lists) as lists, all the way down."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def _text(content: Any) -> str:
    if isinstance(content, list):  # multimodal parts: the text ones
        return " ".join(str(p.get("text") or "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else str(content)


def _arguments(raw: Any) -> dict:
    if isinstance(raw, str):  # some templates give the arguments as a JSON string
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's reach, still just text
            return {"": raw}
    if not isinstance(raw, dict):
        return {} if raw is None else {"": raw}
    return {str(k): v for k, v in raw.items() if v is not None}


def _error(content: str) -> str | None:
    """The message of a failed call's result, `str({"error": message})` as TRL writes it."""
    if not content.startswith(("{'error'", '{"error"')) or len(content) > MAX_ERROR_LITERAL:
        return None
    try:
        value = ast.literal_eval(content)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return str(value["error"]) if isinstance(value, dict) and set(value) == {"error"} else None


def from_messages(completion: Any) -> list[dict] | None:
    """Our turns of one logged completion; None when it is not a list of messages or made no call.

    >>> from_messages([
    ...     {"role": "assistant", "content": "Let me add.", "tool_calls": [
    ...         {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "2+3"}}}]},
    ...     {"role": "tool", "name": "calculator", "content": "5"},
    ...     {"role": "assistant", "content": "5"}])  # doctest: +NORMALIZE_WHITESPACE
    [{'model': 'Let me add.', 'tool': 'calculator', 'arguments': {'expression': '2+3'}, 'result': '5',
      'seconds': None, 'error': None}, {'model': '5'}]
    """
    messages = plain(completion)
    if isinstance(messages, dict):
        messages = [messages]
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return None
    turns: list[dict] = []
    waiting: list[dict] = []  # calls whose result has not come yet, in order
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            calls = [c for c in (m.get("tool_calls") or []) if isinstance(c, dict)]
            if not calls:
                turns.append({"model": _text(m.get("content"))})
            for k, call in enumerate(calls):
                function = call.get("function") if isinstance(call.get("function"), dict) else call
                turn = {"model": _text(m.get("content")) if k == 0 else "", "tool": str(function.get("name") or ""),
                        "arguments": _arguments(function.get("arguments")), "result": "", "seconds": None,
                        "error": None}
                turns.append(turn)
                waiting.append(turn)
        elif role == "tool":
            turn = waiting.pop(0) if waiting else None
            if turn is None:  # a result with no call before it: shown as a call of its tool
                turn = {"model": "", "tool": str(m.get("name") or ""), "arguments": {}, "seconds": None}
                turns.append(turn)
            turn["result"] = _text(m.get("content"))
            turn["error"] = _error(turn["result"])
    if not any("tool" in t for t in turns):
        return None
    return turns


def columns(completions: Sequence[Any], where: str) -> dict[str, pa.Array]:
    """`tool_calls`, `tool_errors` and `turns` for a step's completions (a completion that made no
    call: 0, 0 and its one turn). where: the source, for the one-line refusal of a huge one."""
    from grpo_lab.rundir.importers.build import SourceError  # noqa: PLC0415 - limits imports build too

    calls, errors, texts = [], [], []
    for i, completion in enumerate(completions):
        turns = from_messages(completion)
        if turns is None:
            messages = plain(completion)
            said = [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
            turns = [{"model": _text(said[-1].get("content")) if said else
                      ("" if completion is None else str(completion))}]
        if len(turns) > MAX_TURNS:
            raise SourceError(f"{where}: row {i}: {len(turns)} turns; at most {MAX_TURNS} are imported")
        ran = [t for t in turns if "tool" in t]
        calls.append(len(ran))
        errors.append(sum(t["error"] is not None for t in ran))
        texts.append(json.dumps(turns, default=str, ensure_ascii=False))
    return {"tool_calls": pa.array(calls, pa.int64()), "tool_errors": pa.array(errors, pa.int64()),
            "turns": pa.array(texts, pa.string())}


def any_tool_turn(completions: Sequence[Any]) -> bool:
    """Whether some completion is a list of messages with a tool call or a tool message."""
    return any(from_messages(c) is not None for c in completions)
