"""Running one tool call with a time limit and an output-size limit.

Whatever the tool does (raise, hang, return megabytes), the rollout gets a short text for the
model and goes on; the trainer never crashes on a tool. The tool runs in a daemon worker thread:
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
    text: str  # what the model reads: the tool's output, or "error: ..."
    error: str | None  # None when the tool returned normally within the limits
    seconds: float


def _bind(fn: Callable, arguments: dict) -> dict:
    """A tag call's one argument (key "") goes to the tool's first parameter."""
    if "" not in arguments:
        return arguments
    params = list(inspect.signature(fn).parameters)
    if not params:
        raise TypeError("the tool takes no arguments")
    return {params[0]: arguments[""]}


def run_call(call: ToolCall, tools: dict[str, Callable], timeout_s: float = DEFAULT_TIMEOUT_S,
             max_chars: int = DEFAULT_MAX_CHARS) -> ToolResult:
    """The result of `call` against the tools by name; errors become "error: ..." texts.

    >>> run_call(ToolCall("calculator", {"expression": "1/0"}), {"calculator": lambda expression: 1 / 0}).text
    'error: ZeroDivisionError: division by zero'
    """
    start = time.perf_counter()

    def done(text: str, error: str | None) -> ToolResult:
        return ToolResult(text, error, time.perf_counter() - start)

    if call.error is not None:
        return done(f"error: {call.error}", call.error)
    fn = tools.get(call.name)
    if fn is None:
        message = f"unknown tool {call.name!r}; tools: {', '.join(sorted(tools)) or 'none'}"
        return done(f"error: {message}", message)
    box: dict = {}

    def work() -> None:
        try:
            box["value"] = fn(**_bind(fn, call.arguments))
        except BaseException as exc:  # noqa: BLE001 - a tool's failure is the model's to read
            box["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}".rstrip(": ")

    worker = threading.Thread(target=work, name=f"tool-{call.name}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        message = f"timed out after {timeout_s:g} s"
        return done(f"error: {message}", message)
    if "error" in box:
        return done(f"error: {box['error']}", box["error"])
    text = box.get("value")
    text = "" if text is None else str(text)
    if len(text) > max_chars:
        message = f"output too long ({len(text)} characters; limit {max_chars})"
        return done(f"error: {message}", message)
    return done(text, None)
