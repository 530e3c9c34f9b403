"""End to end: --task big_arithmetic --tools calculator, a real trainer subprocess, its tables read back."""

from __future__ import annotations

import json

import pytest

from grpo_lab.rundir import metrics
from grpo_lab.trainer import tiny
from grpo_lab.trainer.config import ConfigError, load_config
from grpo_lab.trainer.records import tool_scalars
from trainer_helpers import SMALL, always_filled, read_table, run_trainer


TOKENIZER = tiny.build_tokenizer()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    # a warm start long enough to show the calc tag (SMALL's 20 steps are not)
    result = run_trainer(runs, "tools", *SMALL, "--sft-steps", "120", "--task", "big_arithmetic",
                         "--tools", "calculator",
                         "--max-steps", "2", "--max-new-tokens", "20", "--max-tool-calls", "2",
                         "--eval-fraction", "0.05", "--eval-every", "1", "--eval-prompts", "6",
                         "--sft-steps", "80")  # (20 warm-start steps do not teach the calc tag; 80 do)
    assert result.returncode == 0, result.stderr[-2000:]
    return runs / "tools"


def test_scalars_are_the_registered_ones_with_tools(run_dir):
    scalars = read_table(run_dir, "scalars")
    written = {c for c in scalars.columns if c not in ("step", "time", "wall_s")}
    assert written == metrics.names("grpo", ["correctness"], tools=True, evaluated=True)
    assert scalars[always_filled(written)].notna().all().all()
    # the held-out prompts are answered with the tools too (greedy, multi-turn)
    assert (scalars["eval/tools/calls_per_rollout"] >= 0).all() and (scalars["eval/prompts"] == 6).all()
    assert (scalars["tools/calls_per_rollout"] >= 0).all() and scalars["tools/error_frac"].between(0, 1).all()


def as_tokens(text: str) -> str:
    """The text as the built-in model's tokens decode it."""
    return TOKENIZER.decode(TOKENIZER(text, add_special_tokens=False)["input_ids"], skip_special_tokens=True)


def test_samples_record_each_rollouts_turns(run_dir):
    samples = read_table(run_dir, "samples")
    assert len(samples) == 2 * 4 * 4
    for _, row in samples.iterrows():
        turns = json.loads(row["turns"])
        called = [t for t in turns if "tool" in t]
        assert row["tool_calls"] == len(called) <= 2
        assert row["tool_errors"] == sum(t["error"] is not None for t in called)
        # the completion is the model's text and the tools' results, in order (a result the
        # token budget cut short is recorded whole; characters outside the vocabulary, such as an
        # error text's ':', are <unk> tokens, left out of the decoded completion)
        whole = as_tokens("".join(t["model"] + t.get("result", "") for t in turns))
        assert row["completion"] == whole or (row["truncated"] and whole.startswith(row["completion"]))
    # the warm start shows the calc tag: some rollouts call the calculator, and its sums are right
    calls = [t for s in samples["turns"] for t in json.loads(s) if t.get("tool") == "calculator"]
    assert calls
    for t in calls:
        if t["error"] is None and t["arguments"][""].count("+") == 1:
            a, b = t["arguments"][""].split("+")
            assert t["result"] == str(int(a) + int(b))
    # a rollout that called the tool on the prompt's own sum is right (copying the operands is what
    # a longer warm start and GRPO teach; 200 warm-start steps copy most of them, these 120 few)
    used = [row.reward for row in samples.itertuples()
            if row.completion.startswith(f"calc {row.prompt}") and row.tool_calls == 1]
    assert all(reward == 1.0 for reward in used)


def test_tokens_say_who_wrote_them(run_dir):
    tokens, samples = read_table(run_dir, "tokens"), read_table(run_dir, "samples")
    assert set(tokens["source"]) <= {"model", "tool"}
    for (step, group, i), rows in tokens.groupby(["step", "group", "sample_idx"]):
        sample = samples[(samples.step == step) & (samples.group == group) & (samples.sample_idx == i)].iloc[0]
        # the character model: one token per character, so the tool tokens spell the results
        turns = json.loads(sample["turns"])
        results = "".join(t.get("result", "") for t in turns)
        tool = rows.sort_values("position").query("source == 'tool'")["token"]
        if not sample["truncated"]:  # (a result can be cut by the token budget)
            assert len(tool) == len(results)
        if not sample["truncated"] and all(t.get("error") is None for t in turns):  # error texts hold ':', <unk> here
            assert "".join(tool) == results
    scalars = read_table(run_dir, "scalars")
    assert (scalars["tools/turns_per_rollout"] >= 1).all() and (scalars["time/tools_s"] >= 0).all()


def test_tool_scalars_from_turns():
    turns = [[{"model": "calc 1+1=", "tool": "calculator", "result": "2", "seconds": 0.5, "error": None},
              {"model": "ok"}],
             [{"model": "calc 1/0=", "tool": "calculator", "result": "error", "seconds": 0.25, "error": "x"},
              {"model": "calc 2+2=", "tool": "calculator", "result": "4", "seconds": 0.25, "error": None},
              {"model": ""}],
             [{"model": "no call"}]]
    assert tool_scalars(turns) == {"tools/calls_per_rollout": 1.0, "tools/error_frac": 1 / 3,
                                   "tools/turns_per_rollout": 2.0, "time/tools_s": 1.0}
    assert tool_scalars(None) == {}


def test_bad_tool_options_name_the_field():
    for argv, field in ((["--tools", "abacus"], "tools"), (["--environment", "nocolon"], "environment"),
                        (["--max-tool-calls", "0"], "max_tool_calls"), (["--tool-timeout-s", "0"], "tool_timeout_s"),
                        (["--task", "big_arithmetic", "--tools", "calculator", "--max-new-tokens", "17"], "max_new_tokens")):
        with pytest.raises(ConfigError, match=f"^{field}: "):
            load_config(argv).validate()


def test_a_tool_that_does_not_load_stops_the_run_before_it_starts(tmp_path):
    result = run_trainer(tmp_path, "bad", "--tools", "json:no_such_function", "--max-steps", "1")
    assert result.returncode != 0 and "tools: module 'json' has no 'no_such_function'" in result.stderr
    assert not (tmp_path / "bad" / "tables").exists()
