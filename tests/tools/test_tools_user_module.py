"""A TRL-style tool function and environment class from a user's own module, unchanged.

The module is a real file on PYTHONPATH, written as TRL 1.16's docs write them: a plain function
with type hints and a docstring (`tools=[...]`), and a class whose `reset(**kwargs)` gets the
dataset row and whose public methods are the tools (`environment_factory=`). A reward from the
same module takes the `tool_calls` keyword. The trainer runs as a real subprocess, a short run.
"""

from __future__ import annotations

import json
import textwrap
from collections import Counter

import pytest

from grpo_lab.trainer.setup import DRY_RUN_ROWS
from trainer_helpers import SMALL, read_table, run_trainer

USER_MODULE = textwrap.dedent('''
    """A user's tools, written for TRL's GRPOTrainer."""
    import json
    import os


    def _log(**record):
        with open(os.environ["USER_TOOLS_LOG"], "a") as fh:
            fh.write(json.dumps(record) + "\\n")


    def calculator(expression: str) -> str:
        """Add two whole numbers.

        Args:
            expression: a sum such as "123+456".
        """
        _log(kind="function", expression=expression)  # first: a call that raises below is on record too
        a, b = expression.split("+")
        return str(int(a) + int(b))


    class AdderEnv:
        """One instance per rollout; its methods are the tools. Every second call (over all instances)
        raises, on purpose, and no other does: a run has calls that raised and calls that returned,
        whatever the model writes."""

        made = 0  # calls over all instances

        def reset(self, **kwargs):
            self.row = kwargs
            self.calls = 0
            _log(kind="reset", env=id(self), columns=sorted(kwargs), answer=kwargs.get("answer"))

        def calculator(self, expression: str) -> str:
            """Add two whole numbers.

            Args:
                expression: a sum such as "123+456".
            """
            self.calls += 1
            AdderEnv.made += 1
            raises = AdderEnv.made % 2 == 0
            # on record before it can raise: the call is counted on the instance either way
            _log(kind="method", env=id(self), expression=expression, calls=self.calls, raises=raises)
            if raises:
                raise RuntimeError("every second call fails")
            a, _, b = expression.partition("+")
            return str(int(a) + int(b)) if a.isdigit() and b.isdigit() else "not a sum"


    def used_the_tool(prompts, completions, tool_calls, answer, log_extra, **kwargs):
        """1 when the rollout called a tool and its text ends with the answer."""
        assert len(tool_calls) == len(completions) and all(isinstance(c, list) for c in tool_calls)
        log_extra("calls_seen", [len(c) for c in tool_calls])
        return [float(bool(calls) and text.strip().endswith(a)) for text, calls, a in zip(completions, tool_calls, answer)]


    def env_calls(completions, environments, log_extra, **kwargs):
        """TRL's `environments` keyword: each rollout's own instance, after its calls."""
        log_extra("env_calls", [env.calls for env in environments])
        _log(kind="reward", envs=[id(env) for env in environments])
        return [0.0] * len(completions)
''')
# the tiny model learns the calc tag in its warm start (tests/tools/test_tools_run.py); 2 steps of 4 x 4
ARGS = [*SMALL, "--sft-steps", "80", "--task", "big_arithmetic", "--max-steps", "1", "--max-new-tokens", "20",
        "--max-tool-calls", "2", "--rewards", "correctness=1,user_tools:used_the_tool=0.5"]


def train(tmp_path, name: str, *args: str) -> tuple:
    (tmp_path / "user_tools.py").write_text(USER_MODULE)
    log = tmp_path / f"{name}.log"
    result = run_trainer(tmp_path / "runs", name, *ARGS, *args, timeout=600, user_modules=tmp_path,
                         env={"USER_TOOLS_LOG": str(log)})
    assert result.returncode == 0, result.stderr[-2000:]
    records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return read_table(tmp_path / "runs" / name, "samples"), records


def calls_in(samples) -> list[dict]:
    return [t for s in samples["turns"] for t in json.loads(s) if "tool" in t]


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("user-tools")


def test_a_user_tool_function_is_called_as_written(tmp):
    samples, records = train(tmp, "fn", "--tools", "user_tools:calculator")
    calls = calls_in(samples)
    assert calls, "the warm start shows the calc tag: some rollout calls the tool"
    ran = [r for r in records if r["kind"] == "function"]
    # every call in the turns reached the user's function (also one it raised on), and only those
    assert sorted(r["expression"] for r in ran) == sorted(t["arguments"][""] for t in calls)
    for t in calls:
        if t["error"] is None:
            a, b = t["arguments"][""].split("+")
            assert t["tool"] == "calculator" and t["result"] == str(int(a) + int(b))
    # the user's reward got tool_calls for each completion: the counts it logged are the table's
    assert samples["extra/calls_seen"].tolist() == samples["tool_calls"].astype(float).tolist()


def test_a_user_environment_gets_a_fresh_instance_per_rollout_reset_with_its_row(tmp):
    # a long time limit: on a loaded machine a call that timed out would read as raised (it is not what this checks)
    samples, records = train(tmp, "env", "--environment", "user_tools:AdderEnv", "--tool-timeout-s", "60", "--rewards",
                             "correctness=1,user_tools:used_the_tool=0.5,user_tools:env_calls=0.1")
    # the dry run before the model loads: an instance per first row, reset, handed to the reward
    dry, records = records[:DRY_RUN_ROWS + 1], records[DRY_RUN_ROWS + 1:]
    assert [r["kind"] for r in dry] == ["reset"] * DRY_RUN_ROWS + ["reward"]
    assert dry[-1]["envs"] == [r["env"] for r in dry[:-1]]
    resets = [r for r in records if r["kind"] == "reset"]
    # one reset per rollout (4 prompts x 4), with the row's columns (TRL: reset(**row))
    assert len(resets) == len(samples) == 16
    assert all("answer" in r["columns"] for r in resets)
    assert Counter(r["answer"] for r in resets) == Counter(samples["answer"].astype(str))
    methods = [r for r in records if r["kind"] == "method"]
    assert len(methods) >= 2, "the warm start shows the calc tag: rollouts call the environment's tool"
    assert {m["raises"] for m in methods} == {True, False}  # the method raised on every second call
    # a method runs on an instance that was reset, and its state is that rollout's own
    reset_envs = {r["env"] for r in resets}
    assert all(m["env"] in reset_envs for m in methods)
    per_env = Counter(m["env"] for m in methods)
    assert all(m["calls"] <= per_env[m["env"]] for m in methods) and max(per_env.values()) <= 2  # max-tool-calls
    assert len(calls_in(samples)) >= len(methods)
    # the reward got each rollout's own instance, in the samples' order, after the rollout's calls
    (scored,) = [r["envs"] for r in records if r["kind"] == "reward"]
    assert sorted(scored) == sorted(r["env"] for r in resets)
    assert samples["extra/env_calls"].astype(int).tolist() == [per_env[e] for e in scored]
    # each rollout's calls, those that raised too, went to its own instance, in order: a call in its turns
    # is one on record for its instance, and the turn's error is there exactly where the method raised
    for turns, env in zip(samples["turns"], scored):
        made = [(t["arguments"][""], t["error"] is not None) for t in json.loads(turns) if "tool" in t]
        assert made == [(m["expression"], m["raises"]) for m in methods if m["env"] == env], (turns, env)
