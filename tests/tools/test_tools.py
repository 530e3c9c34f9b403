"""Tools as TRL users write them, the calculator, tool-call parsing, and running a tool safely."""

from __future__ import annotations

import time

import pytest

from grpo_lab.tools import (CHARACTER_CALC, XML_CALC, ToolCall, ToolError, calculator, environment_tools, find_call,
                            load_environment, load_tools, new_environment, python_tool, run_call)

USER_MODULE = '''
def word_count(text: str) -> int:
    """Count the words of a text.

    Args:
        text: the text.
    """
    return len(text.split())


class Counter:
    """An environment: one instance per rollout, its public methods the tools."""

    def __init__(self):
        self.total = 0

    def reset(self, start=0, **columns):
        self.total = int(start)

    def add(self, amount: int) -> int:
        """Add to the running total."""
        self.total += int(amount)
        return self.total

    def _hidden(self):
        return "not a tool"
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "my_tools.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_tools"


# --- calculator ------------------------------------------------------------------------------------


def test_calculator_adds_what_the_tiny_model_cannot():
    assert calculator("12345+67890") == "80235"
    assert calculator(" (1+2)*3 - 4 // 3 ") == "8"


@pytest.mark.parametrize("text", ["__import__('os').system('true')", "open('x')", "a+1", "'a'*3", "2**10**10",
                                  "9" * 300, "1;2", ""])
def test_calculator_refuses_anything_but_bounded_arithmetic(text):
    with pytest.raises(ValueError):
        calculator(text)


# --- parsing ---------------------------------------------------------------------------------------


def test_json_call_as_chat_templates_write_it():
    text = 'Let me add. <tool_call>{"name": "calculator", "arguments": {"expression": "2+3"}}</tool_call> more'
    call = find_call(text)
    assert (call.name, call.arguments, call.error) == ("calculator", {"expression": "2+3"}, None)
    assert text[:call.end].endswith("</tool_call>")


def test_json_call_with_string_arguments_and_broken_json():
    assert find_call('<tool_call>{"name": "f", "arguments": "{\\"x\\": 1}"}</tool_call>').arguments == {"x": 1}
    broken = find_call("<tool_call>{name: f}</tool_call>")
    assert broken.error and "not JSON" in broken.error


def test_tag_forms_and_unclosed_calls():
    assert find_call("<calc>12345+67890</calc> is", (XML_CALC,)).arguments == {"": "12345+67890"}
    call = find_call("calc 12345+67890=80235", (CHARACTER_CALC,))
    assert (call.name, call.arguments, call.end) == ("calculator", {"": "12345+67890"}, len("calc 12345+67890="))
    assert find_call("calc 12345+678", (CHARACTER_CALC,)) is None
    assert find_call("<tool_call>{\"name\": \"f\"") is None
    assert find_call("no call here") is None


# --- running ---------------------------------------------------------------------------------------


def _slow(seconds: float) -> str:
    time.sleep(seconds)
    return "late"


def test_a_tag_call_fills_the_first_parameter():
    result = run_call(ToolCall("calculator", {"": "2*21"}), {"calculator": calculator})
    assert (result.text, result.error) == ("42", None)


def test_raise_hang_and_huge_output_become_error_texts():
    tools = {"calculator": calculator, "slow": _slow, "huge": lambda: "x" * 10_000}
    raised = run_call(ToolCall("calculator", {"expression": "1/0"}), tools)
    # the model reads TRL 1.16's failure text, str({"error": str(e)}); the run records the type too
    assert raised.text == "{'error': 'division by zero'}" and raised.error == "ZeroDivisionError: division by zero"
    start = time.perf_counter()
    hung = run_call(ToolCall("slow", {"seconds": 5}), tools, timeout_s=0.2)
    assert time.perf_counter() - start < 2 and hung.text == "{'error': 'timed out after 0.2 s'}"
    huge = run_call(ToolCall("huge", {}), tools, max_chars=100)
    assert huge.text.startswith("{'error': 'output too long (10000 characters")
    unknown = run_call(ToolCall("nope", {}), tools)
    assert unknown.text == "{'error': 'Tool nope not found.'}" and unknown.error.startswith("unknown tool 'nope'")
    assert run_call(ToolCall("slow", {"bad": 1}), tools).error.startswith("TypeError")


# --- loading ---------------------------------------------------------------------------------------


def test_user_function_and_builtin_by_name(user_module):
    tools = load_tools(f"calculator, {user_module}:word_count")
    assert list(tools) == ["calculator", "word_count"]
    call = find_call('<tool_call>{"name": "word_count", "arguments": {"text": "a b c"}}</tool_call>')
    assert run_call(call, tools).text == "3"


@pytest.mark.parametrize("spec, message", [("abacus", "not module:name"), ("no_such_mod:f", "cannot import"),
                                           ("json:nope", "has no 'nope'")])
def test_bad_tool_specs_name_the_field(spec, message):
    with pytest.raises(ToolError, match=f"^tools: .*{message}"):
        load_tools(spec)


def test_environment_is_fresh_per_rollout_and_reset_with_the_row(user_module):
    cls = load_environment(f"{user_module}:Counter")
    first = environment_tools(new_environment(cls, {"start": 10, "answer": "x"}))
    assert sorted(first) == ["add"]  # reset and _hidden are not tools
    assert run_call(ToolCall("add", {"amount": 5}), first).text == "15"
    second = environment_tools(new_environment(cls, {"start": 1}))
    assert run_call(ToolCall("add", {"amount": 5}), second).text == "6"
    with pytest.raises(ToolError, match="^environment: "):
        load_environment(f"{user_module}:word_count")


# --- the sandboxed python tool ---------------------------------------------------------------------


def test_python_tool_runs_in_the_sandbox_and_its_failures_are_texts():
    tools = load_tools("python")
    run = lambda code: run_call(ToolCall("python", {"code": code}), tools)  # noqa: E731
    assert run("print(12345 * 6789)").text == "83810205"
    assert run("raise ValueError('bad')").text == "{'error': 'ValueError: bad'}"
    # no network inside bubblewrap (the trainer's process would have one)
    assert "Network is unreachable" in run("import socket; socket.create_connection(('1.1.1.1', 80))").text
    assert run("print('x' * 10**6)").text.startswith("{'error': 'output too long")
    # the sandbox's own 4 s kill must come first: a wider runner limit, so a slow sandbox start cannot race it
    hung = run_call(ToolCall("python", {"code": "while True: pass"}), tools, timeout_s=python_tool.WALL_S + 5)
    assert hung.error == "TimeoutError: the code ran past 4 s" and hung.seconds < python_tool.WALL_S + 3


def test_the_dashboard_runs_no_tool_module_it_was_not_told_to(tmp_path, monkeypatch):
    from grpo_lab.launching import allowed

    monkeypatch.delenv(allowed.REWARD_MODULES_ENV, raising=False)
    assert allowed.check_launch({"tools": "calculator"}, tmp_path) is None
    assert allowed.check_launch({"tools": "calculator,os:system"}, tmp_path).startswith("tools: 'os:system' imports")
    assert allowed.check_launch({"environment": "my_env:Env"}, tmp_path).startswith("environment: 'my_env:Env'")
    monkeypatch.setenv(allowed.REWARD_MODULES_ENV, "my_env")
    assert allowed.check_launch({"environment": "my_env:Env"}, tmp_path) is None
