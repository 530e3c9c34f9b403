"""Running one tool call with a time limit and an output-size limit.

Whatever the tool does (raise, hang, return megabytes), the rollout gets a short text for the
model and goes on; the trainer never crashes on a tool. A failure reads as TRL 1.16 writes it
(`str({"error": str(exception)})`, its "Tool x not found." for an unknown tool), so a model
trained here reads the failures it would read under TRL. The tool runs in a daemon worker thread:
on a timeout the rollout stops waiting and the thread is abandoned (Python cannot kill a thread;
a tool that must be stopped hard belongs in a subprocess sandbox, as grpo_lab/rewards/sandbox.py
does for code). A thread keeps environment instances (their state) and user functions usable as
they are, with no pickling.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from grpo_lab.tools.parsing import ToolCall

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MAX_CHARS = 2000


@dataclass(frozen=True)
class ToolResult:
    text: str  # what the model reads: the tool's output, or failure_text(...)
    error: str | None  # None when the tool returned normally within the limits; else "Type: message"
    seconds: float


def _bind(fn: Callable, arguments: dict) -> dict:
    """A tag call's one argument (key "") goes to the tool's first parameter."""
    if "" not in arguments:
        return arguments
    params = list(inspect.signature(fn).parameters)
    if not params:
        raise TypeError("the tool takes no arguments")
    return {params[0]: arguments[""]}


def failure_text(message: str) -> str:
    """What the model reads when a call fails: TRL's `str({"error": message})`.

    >>> failure_text("division by zero")
    "{'error': 'division by zero'}"
    """
    return str({"error": message})


def run_call(call: ToolCall, tools: dict[str, Callable], timeout_s: float = DEFAULT_TIMEOUT_S,
             max_chars: int = DEFAULT_MAX_CHARS) -> ToolResult:
    """The result of `call` against the tools by name; a failure's text is failure_text's.

    >>> r = run_call(ToolCall("calculator", {"expression": "1/0"}), {"calculator": lambda expression: 1 / 0})
    >>> r.text, r.error
    ("{'error': 'division by zero'}", 'ZeroDivisionError: division by zero')
    """
    start = time.perf_counter()

    def done(text: str, error: str | None) -> ToolResult:
        return ToolResult(text, error, time.perf_counter() - start)

    if call.error is not None:
        return done(failure_text(call.error), call.error)
    fn = tools.get(call.name)
    if fn is None:
        message = f"unknown tool {call.name!r}; tools: {', '.join(sorted(tools)) or 'none'}"
        return done(failure_text(f"Tool {call.name} not found."), message)
    box: dict = {}

    def work() -> None:
        try:
            box["value"] = fn(**_bind(fn, call.arguments))
        except BaseException as exc:  # noqa: BLE001 - a tool's failure is the model's to read
            box["said"] = str(exc)[:DEFAULT_MAX_CHARS]  # TRL's text: str(e)
            box["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}".rstrip(": ")

    worker = threading.Thread(target=work, name=f"tool-{call.name}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        message = f"timed out after {timeout_s:g} s"
        return done(failure_text(message), message)
    if "error" in box:
        return done(failure_text(box["said"]), box["error"])
    text = box.get("value")
    text = "" if text is None else str(text)
    if len(text) > max_chars:
        message = f"output too long ({len(text)} characters; limit {max_chars})"
        return done(failure_text(message), message)
    return done(text, None)
