"""Tool turns from TRL runs: the live callback and the importer fill turns, tool_calls, tool_errors.

The fixture is shaped as TRL 1.16 logs a run with `tools=[...]` (GRPOTrainer._tool_call_loop, then
`_logs["completion"]`, written to completions/completions_<step>.parquet by pandas): each completion
the list of messages after the prompt, assistant messages with `tool_calls`, `tool` messages with
the results, a failed call's result `str({"error": message})`. Running TRL itself with tools needs a
model whose chat template parses tool calls (transformers' response schema), which the tiny test
model has not.
"""

from __future__ import annotations

import importlib
import json
from collections import defaultdict, deque
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from app_helpers import html_bodies, open_page
from grpo_lab.rundir.importers import names
from grpo_lab.rundir.importers.turns import from_messages
from trainer_helpers import read_table
from trl_tool_helpers import ADVANTAGES, COMPLETIONS, G, PROMPTS, REWARDS, call, write_output

cli = importlib.import_module("grpo_lab.rundir.import")


def check_turns(samples):
    samples = samples.sort_values("sample_idx").sort_values("group", kind="stable")
    assert samples["tool_calls"].tolist() == [1, 2, 0, 1]
    assert samples["tool_errors"].tolist() == [0, 1, 0, 0]
    turns = [json.loads(t) for t in samples["turns"]]
    assert turns[0] == [{"model": "Let me add.", "tool": "calculator", "arguments": {"expression": "12345+67890"},
                         "result": "80235", "seconds": None, "error": None}, {"model": "80235"}]
    # one turn per call, as the native trainer writes them; the message's text on the first
    assert [(t["model"], t.get("tool"), t.get("arguments"), t.get("error")) for t in turns[1]] == [
        ("", "calculator", {"expression": "12345+67890"}, None), ("", "lookup", {"key": "x"}, "Tool lookup not found."),
        ("80235", None, None, None)]
    assert turns[2] == [{"model": "4"}]
    assert turns[3] == [{"model": "Hmm.", "tool": "calculator", "arguments": {"expression": "2+2"}, "result": "",
                         "seconds": None, "error": None}]
    # the completion text names the calls too
    assert samples["completion"].iloc[0] == ('assistant: Let me add. [calculator(expression="12345+67890")]\n'
                                             'tool: 80235\nassistant: 80235')


def test_a_parquet_round_trip_keeps_every_call(tmp_path):
    """pandas -> Parquet unifies the messages' fields: a missing one reads back as null (and the
    arguments of different tools share one struct); the turns are the same as from the objects."""
    direct = [from_messages(c) for c in COMPLETIONS]
    assert direct[2] is None  # no call: no tool turns
    assert direct[1][1]["error"] == "Tool lookup not found." and direct[3][0]["result"] == ""
    pd.DataFrame({"completion": COMPLETIONS}).to_parquet(tmp_path / "c.parquet")
    back = pd.read_parquet(tmp_path / "c.parquet")["completion"].tolist()
    assert back[0][0]["tool_calls"][0]["function"]["arguments"]["key"] is None  # the other tool's parameter
    assert [from_messages(c) for c in back] == direct
    assert from_messages("just text") is None and from_messages([{"role": "assistant", "content": "4"}]) is None


def test_the_importer_fills_the_tool_columns(tmp_path, monkeypatch):
    out = write_output(tmp_path / "trl-out")
    assert cli.main([str(out), "--name", "trl-tools", "--runs-dir", str(tmp_path / "runs"),
                     "--reward-weights", "correct=1"]) == 0
    run = tmp_path / "runs" / "trl-tools"
    check_turns(read_table(run, "samples"))
    scalars = read_table(run, "scalars")
    assert scalars["tools/calls_per_rollout"].tolist() == [1.0] and scalars["tools/error_frac"].tolist() == [0.25]
    # the Groups page shows the imported turns (of the group with a spread, the 2+2 one): the call
    # set apart from the text, and no time (TRL logs none)
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path / "runs"))
    at = open_page("groups", "trl-tools")
    assert not at.exception
    shown = html_bodies(at)
    assert shown.count('class="grpo-turn-tool"') == 1 and "calculator(expression=&quot;2+2&quot;)" in shown
    assert "Hmm." in shown and " s</span>" not in shown


def test_an_import_without_tool_turns_has_no_tool_columns(tmp_path):
    out = write_output(tmp_path / "trl-out", [[{"role": "assistant", "content": str(i)}] for i in range(4)])
    assert cli.main([str(out), "--name", "plain", "--runs-dir", str(tmp_path / "runs"),
                     "--reward-weights", "correct=1"]) == 0
    assert not {"turns", "tool_calls", "tool_errors"} & set(read_table(tmp_path / "runs" / "plain", "samples").columns)


def test_the_live_callback_fills_the_tool_columns(tmp_path):
    """The callback reads TRL's `_logs` as GRPOTrainer 1.16 keeps them (deques of the latest batch)."""
    from transformers import TrainerControl, TrainerState
    from trl import GRPOConfig

    from grpo_lab.rundir.trl import RunDirCallback

    def calculator(expression: str) -> str:
        """Add.

        Args:
            expression: the sum.
        """
        return expression

    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", num_generations=G,
                      per_device_train_batch_size=4, max_steps=1, save_strategy="no")
    logs = {"images": deque(), "prompt": deque([p for p in PROMPTS for _ in range(G)]),
            "completion": deque(COMPLETIONS), "rewards": defaultdict(deque, {"correct": deque(REWARDS)}),
            "advantages": deque(ADVANTAGES), "extra": defaultdict(deque)}
    trainer = SimpleNamespace(args=args, _logs=logs, _buffered_inputs=[object()], reward_func_names=["correct"],
                              reward_weights=torch.ones(1), tools=[calculator], train=lambda: None,
                              train_dataset=None)
    callback = RunDirCallback(tmp_path / "runs" / "live-tools", trainer=trainer)
    state, control = TrainerState(max_steps=1, is_world_process_zero=True), TrainerControl()
    callback.on_train_begin(args, state, control, model=None)
    state.global_step = 1
    callback.on_log(args, state, control, logs={"reward": 0.75, "tools/call_frequency": 1.0,
                                                "tools/failure_frequency": 0.25})
    callback.on_step_end(args, state, control)
    callback.on_train_end(args, state, control)
    run = tmp_path / "runs" / "live-tools"
    check_turns(read_table(run, "samples"))
    assert read_table(run, "scalars")["tools/error_frac"].tolist() == [0.25]


@pytest.mark.parametrize("content, error", [
    (str({"error": "boom"}), "boom"), ('{"error": "json boom"}', "json boom"),
    (str({"error": "x", "other": 1}), None),  # a tool's own dict result, not TRL's failure
    ("{'error': ", None), ("80235", None)])
def test_only_trls_failure_text_counts_as_an_error(content, error):
    turns = from_messages([{"role": "assistant", "content": "", "tool_calls": [call("t")]},
                           {"role": "tool", "name": "t", "content": content}])
    assert turns[0]["error"] == error and turns[0]["result"] == content


def test_the_metric_names_map_trls_tool_metrics():
    assert names.metric_name("tools/call_frequency") == "tools/calls_per_rollout"
    assert names.metric_name("tools/failure_frequency") == "tools/error_frac"
