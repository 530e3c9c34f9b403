"""A TRL 1.16 output folder of a run with tools, as GRPOTrainer writes it (tests/rundir/test_trl_tool_turns.py
says where each shape comes from): completions/completions_<step>.parquet and trainer_state.json."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

G = 2
PROMPTS = [[{"role": "user", "content": "What is 12345+67890?"}], [{"role": "user", "content": "What is 2+2?"}]]


def call(name, **arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


COMPLETIONS = [
    # a call, its result, the answer
    [{"role": "assistant", "content": "Let me add.", "tool_calls": [call("calculator", expression="12345+67890")]},
     {"role": "tool", "name": "calculator", "content": "80235"},
     {"role": "assistant", "content": "80235"}],
    # two calls in one message, the second failed (TRL: content str({"error": ...}))
    [{"role": "assistant", "content": "", "tool_calls": [call("calculator", expression="12345+67890"),
                                                         call("lookup", key="x")]},
     {"role": "tool", "name": "calculator", "content": "80235"},
     {"role": "tool", "name": "lookup", "content": str({"error": "Tool lookup not found."})},
     {"role": "assistant", "content": "80235"}],
    # no call
    [{"role": "assistant", "content": "4"}],
    # a call whose result TRL dropped (it would pass max_completion_length)
    [{"role": "assistant", "content": "Hmm.", "tool_calls": [call("calculator", expression="2+2")]}],
]
REWARDS = [1.0, 1.0, 1.0, 0.0]
ADVANTAGES = [0.0, 0.0, 0.7, -0.7]


def write_output(out: Path, completions: list = COMPLETIONS) -> Path:
    """The folder TRL leaves with log_completions=True, one logged step of 2 prompts x G."""
    (out / "completions").mkdir(parents=True)
    table = {"step": [1] * 4, "prompt": [p for p in PROMPTS for _ in range(G)], "completion": completions,
             "correct": REWARDS, "advantage": ADVANTAGES}
    pd.DataFrame(table).to_parquet(out / "completions" / "completions_00001.parquet")  # as TRL's _log writes it
    history = [{"step": 1, "reward": 0.75, "rewards/correct/mean": 0.75, "tools/call_frequency": 1.0,
                "tools/failure_frequency": 0.25, "loss": 0.1}]
    (out / "trainer_state.json").write_text(json.dumps({"log_history": history, "max_steps": 1}))
    return out
