"""Rewards of tool rollouts see the conversation as TRL 1.16 hands it over, and the calls made."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import torch

from grpo_lab import rewards
from grpo_lab.tools import CHARACTER_CALC, XML_CALC, calculator
from grpo_lab.trainer import multiturn
from grpo_lab.trainer.config import load_config
from grpo_lab.trainer.rollout import Rollout
from grpo_lab.trainer.scoring import reward_inputs, score_rollout

CHAT = [{"role": "user", "content": "What is 12345+67890?"}]
# a rollout as multiturn.py records it: a tag call, its result, then the answer
CALLED = [{"model": "Let me add. <calc>12345+67890</calc>", "tool": "calculator", "arguments": {"": "12345+67890"},
           "result": "80235", "seconds": 0.001, "error": None},
          {"model": " The answer is 80235."}]
JSON_CALL = ('<tool_call>{"name": "lookup", "arguments": {"key": "x"}}</tool_call>')
FAILED = [{"model": JSON_CALL, "tool": "lookup", "arguments": {"key": "x"}, "result": "error: KeyError: 'x'",
           "seconds": 0.0, "error": "KeyError: 'x'"},
          {"model": "I do not know."}]
PLAIN = [{"model": "80235"}]

# What TRL 1.16's tool loop gives a reward for CALLED (GRPOTrainer._tool_call_loop): the assistant
# message that made the call, with the call parsed out of its content; the tool's message; the answer.
CALLED_AS_TRL = [
    {"role": "assistant", "content": "Let me add. ",
     "tool_calls": [{"type": "function", "function": {"name": "calculator",
                                                      "arguments": {"expression": "12345+67890"}}}]},
    {"role": "tool", "name": "calculator", "content": "80235"},
    {"role": "assistant", "content": " The answer is 80235."},
]


class Env:
    def reset(self, **row):
        self.row = row

    def lookup(self, key: str) -> str:
        """Look a key up."""
        return self.row[key]


def tool_setup():
    return multiturn.ToolSetup(tools={"calculator": calculator}, environment=Env, tags=(XML_CALC,))


def test_a_conversational_prompts_completion_is_the_conversation_with_its_tool_turns():
    rows = [{"prompt_id": "1", "prompt": "rendered", "source_prompt": CHAT, "answer": "80235"}]
    prompts, completions, columns = reward_inputs(rows, ["flat 1", "flat 2", "flat 3"], 3,
                                                  turns=[CALLED, FAILED, PLAIN], tools=tool_setup())
    assert prompts == [CHAT] * 3
    assert completions[0] == CALLED_AS_TRL
    assert completions[1] == [
        {"role": "assistant", "content": "",
         "tool_calls": [{"type": "function", "function": {"name": "lookup", "arguments": {"key": "x"}}}]},
        {"role": "tool", "name": "lookup", "content": "error: KeyError: 'x'"},
        {"role": "assistant", "content": "I do not know."}]
    assert completions[2] == [{"role": "assistant", "content": "80235"}]  # no call: TRL's one message
    assert columns["answer"] == ["80235"] * 3
    assert columns["tool_calls"] == [
        [{"name": "calculator", "arguments": {"expression": "12345+67890"}, "result": "80235", "error": None,
          "seconds": 0.001}],
        [{"name": "lookup", "arguments": {"key": "x"}, "result": "error: KeyError: 'x'", "error": "KeyError: 'x'",
          "seconds": 0.0}],
        []]


def test_a_plain_text_prompts_completion_stays_the_text_the_model_and_tools_wrote():
    rows = [{"prompt_id": "1", "prompt": "12345+67890=", "answer": "80235"}]
    _, completions, columns = reward_inputs(rows, ["calc 12345+67890=80235 80235"], 1,
                                            turns=[[{"model": "calc 12345+67890=", "tool": "calculator",
                                                     "arguments": {"": "12345+67890"}, "result": "80235",
                                                     "seconds": 0.0, "error": None}, {"model": " 80235"}]],
                                            tools=multiturn.ToolSetup({"calculator": calculator},
                                                                      tags=(CHARACTER_CALC,)))
    assert completions == ["calc 12345+67890=80235 80235"]
    assert columns["tool_calls"][0][0]["arguments"] == {"expression": "12345+67890"}
    # without tools there is no tool_calls keyword (a reward without **kwargs keeps working)
    assert "tool_calls" not in reward_inputs(rows, ["x"], 1)[2]


def test_a_user_reward_receives_the_messages_and_the_calls_through_score_rollout():
    """The trainer's own path: score_rollout builds the messages from rollout.turns."""
    seen = {}

    def used_the_tool(prompts, completions, tool_calls, answer, **kwargs):
        seen.update(prompts=prompts, completions=completions, tool_calls=tool_calls, kwargs=kwargs)
        assert all(isinstance(c, list) and c[-1]["role"] == "assistant" for c in completions)
        return [float(any(m["role"] == "tool" and m["content"] == a for m in c) and not calls[-1:][0]["error"])
                if calls else 0.0 for c, calls, a in zip(completions, tool_calls, answer)]

    cfg = load_config(["--group-size", "3", "--prompts-per-step", "1", "--max-steps", "4"])
    rows = [{"prompt_id": "1", "prompt": "rendered", "source_prompt": CHAT, "answer": "80235"}]
    correct = rewards.build("correctness")
    c = SimpleNamespace(cfg=cfg, task=SimpleNamespace(rows=rows), dist=SimpleNamespace(writer=True),
                        log=logging.getLogger("test"), reward_notes={}, tool_setup=tool_setup(),
                        reward_fns={"used_the_tool": (used_the_tool, 1.0), "correctness": (correct, 1.0)},
                        stop_requested=lambda: False)
    ids = torch.tensor([[5, 6, 7, 0], [5, 6, 0, 0], [5, 0, 0, 0]])
    rollout = Rollout(input_ids=torch.cat([torch.ones(3, 2, dtype=torch.long), ids], dim=1),
                      attention_mask=torch.ones(3, 6, dtype=torch.long), prompt_len=2,
                      completion_mask=(ids > 0).long(), truncated=torch.zeros(3, dtype=torch.bool),
                      completions=["flat"] * 3, generation_s=0.0, tool_mask=torch.zeros_like(ids),
                      turns=[CALLED, FAILED, PLAIN])
    scores, totals = score_rollout(c, rows, rollout, step=1)
    assert seen["completions"][0] == CALLED_AS_TRL and seen["prompts"] == [CHAT] * 3
    assert [len(calls) for calls in seen["tool_calls"]] == [1, 1, 0]
    assert {"completion_ids", "trainer_state", "log_extra", "log_metric"} <= set(seen["kwargs"])
    assert scores.per_reward["used_the_tool"] == [1.0, 0.0, 0.0]
    # the built-in correctness reads the final assistant message: right, wrong, right
    assert scores.per_reward["correctness"] == [1.0, 0.0, 1.0] and scores.errors == {"used_the_tool": 0,
                                                                                      "correctness": 0}
    assert totals.tolist() == [2.0, 0.0, 1.0]


def test_trls_own_accuracy_reward_reads_what_it_reads_in_trl():
    """TRL's accuracy_reward takes completion[0]["content"]: in a tool rollout, the text before
    the first call. Given TRL's messages, it scores here as it would in TRL."""
    import pytest

    trl_rewards = pytest.importorskip("trl.rewards")
    pytest.importorskip("math_verify")
    rows = [{"prompt_id": "1", "prompt": "r", "source_prompt": CHAT, "solution": "80235"}]
    boxed = [dict(CALLED[0]), {"model": r"So \boxed{80235}"}]
    prompts, completions, columns = reward_inputs(rows, ["x", "y"], 2, turns=[boxed, [{"model": r"\boxed{80235}"}]],
                                                  tools=tool_setup())
    scores = rewards.score_all({"acc": (trl_rewards.accuracy_reward, 1.0)}, prompts, completions, columns)
    assert scores.per_reward["acc"] == [0.0, 1.0]


def test_the_dry_run_passes_tool_calls_in_a_run_with_tools():
    """A reward that needs `tool_calls` is accepted before the model loads in a run with tools, and
    refused, with the line naming the missing argument, in a run without."""
    import pytest

    from grpo_lab.trainer.config import ConfigError
    from grpo_lab.trainer.setup import dry_run
    from grpo_lab.trainer.tasks import Task

    def calls_made(prompts, completions, tool_calls, **kwargs):
        return [float(len(c)) for c in tool_calls]

    task = Task("t", [{"prompt_id": "1", "prompt": "1+2=", "answer": "3"}])
    with_tools = load_config(["--tools", "calculator", "--task", "big_arithmetic", "--max-new-tokens", "20"])
    assert dry_run(with_tools, {"calls_made": (calls_made, 1.0)}, task) == []
    with pytest.raises(ConfigError, match="tool_calls"):
        dry_run(load_config([]), {"calls_made": (calls_made, 1.0)}, task)


def test_the_dry_run_passes_environments_and_names_a_reset_that_fails(tmp_path, monkeypatch):
    """TRL's `environments` keyword: a reward that takes it is accepted before the model loads in a
    run with an environment class (one instance per row, reset with it), and an environment whose
    reset raises on the task's rows is refused in one line naming the option."""
    import textwrap

    import pytest

    from grpo_lab.trainer.config import ConfigError
    from grpo_lab.trainer.setup import dry_run
    from grpo_lab.trainer.tasks import Task

    (tmp_path / "dry_env.py").write_text(textwrap.dedent('''
        class Env:
            def reset(self, **row):
                self.answer = row["answer"]

            def check(self, guess: str) -> str:
                """Say whether a guess is right.

                Args:
                    guess: the number.
                """
                return str(guess == self.answer)

        class Broken(Env):
            def reset(self, **row):
                raise KeyError("level")
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []

    def by_env(completions, environments, **kwargs):
        seen.extend(env.answer for env in environments)
        return [0.0] * len(completions)

    task = Task("t", [{"prompt_id": "1", "prompt": "1+2=", "answer": "3"}, {"prompt_id": "2", "prompt": "2+2=",
                                                                          "answer": "4"}])
    cfg = load_config(["--environment", "dry_env:Env", "--task", "big_arithmetic", "--max-new-tokens", "20"])
    assert dry_run(cfg, {"by_env": (by_env, 1.0)}, task) == []
    assert seen == ["3", "4"]
    broken = load_config(["--environment", "dry_env:Broken", "--task", "big_arithmetic", "--max-new-tokens", "20"])
    with pytest.raises(ConfigError, match=r"^environment: dry_env:Broken: reset\(\*\*row\) raised KeyError"):
        dry_run(broken, {"by_env": (by_env, 1.0)}, task)
