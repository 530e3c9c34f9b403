"""big_arithmetic with the calculator: the warm start and the task's defaults that let GRPO learn the tool.

The findings behind them: with the built-in model's 60 warm-start steps the model writes the calc tag
but miscopies the operands ("calc 945+118=" for 945+178), so a call rarely helps; about 500 steps
copy them. Training on the tool's results in the warm start would show each sum about 60 times,
and math-verify scored the restated question ("calc 143+528", then EOS) as right: both let a run
without the tool score without adding. bench/bench_tools.py has the learning curves over seeds.
"""

from __future__ import annotations

import doctest
import json
import sys
from pathlib import Path

import pytest
import torch

from grpo_lab import rewards
from grpo_lab.trainer import tiny
from grpo_lab.trainer.config import ConfigError, from_dict, load_config
from grpo_lab.trainer.sft import warm_start
from grpo_lab.trainer.tasks import big_arithmetic
from trainer_helpers import read_table, run_trainer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bench_tools  # noqa: E402


def test_the_bench_curves_table():
    result = doctest.testmod(bench_tools)
    assert result.attempted >= 2 and result.failed == 0


def test_warm_start_calls_copy_the_prompt_and_plain_answers_stay_random():
    task = big_arithmetic(seed=3)
    pairs = task.sft_pairs(seed=3, n=2000, answers_correct=False)
    calls = [(p, c) for p, c in pairs if not isinstance(c, str)]
    assert 0.4 < len(calls) / len(pairs) < 0.6  # both forms, for RL to pick between
    for prompt, completion in calls:  # an exact copy of the sum (trained), then the tool's result (not)
        a, b = prompt.rstrip("=").split("+")
        assert completion == ((f"calc {a}+{b}=", True), (str(int(a) + int(b)), False))
    plain = [(p, c) for p, c in pairs if isinstance(c, str)]
    right = sum(c == str(int(p[:3]) + int(p[4:7])) for p, c in plain)
    assert right / len(plain) < 0.05  # the plain form teaches the format, not the sums


def test_the_warm_start_does_not_train_on_the_tools_result(monkeypatch):
    """The labels of a calc example: the call and EOS are targets, the result (the tool's) is not."""
    tokenizer, model = tiny.build_tokenizer(), tiny.build_model(tiny.build_tokenizer(), 0)
    seen = []
    forward = model.forward
    monkeypatch.setattr(model, "forward", lambda **kw: seen.append(kw["labels"]) or forward(**kw))
    pair = ("123+456=", (("calc 123+456=", True), ("579", False)))
    warm_start(model, tokenizer, [pair], steps=1, device=torch.device("cpu"), batch_size=1)
    labels = seen[0][0].tolist()
    ids = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    assert labels == [-100] * 8 + ids("calc 123+456=") + [-100] * 3 + [tokenizer.eos_token_id]
    # a plain string completion is all target, as before
    seen.clear()
    warm_start(model, tokenizer, [("1+2=", "3")], steps=1, device=torch.device("cpu"), batch_size=1)
    assert seen[0][0].tolist() == [-100] * 4 + ids("3") + [tokenizer.eos_token_id]


def test_big_arithmetic_defaults_leave_room_for_the_call_and_a_long_warm_start():
    cfg = load_config(["--task", "big_arithmetic", "--tools", "calculator"]).validate()
    assert (cfg.lr, cfg.sft_steps, cfg.max_new_tokens) == (5e-4, 500, 20)
    # the same run without tools gets the same budget and warm start (a fair comparison)
    plain = load_config(["--task", "big_arithmetic"]).validate()
    assert (plain.lr, plain.sft_steps, plain.max_new_tokens) == (5e-4, 500, 20)
    # given values win; other tasks and pretrained models keep their model's defaults
    cfg = load_config(["--task", "big_arithmetic", "--sft-steps", "7", "--max-new-tokens", "30"]).validate()
    assert (cfg.sft_steps, cfg.max_new_tokens) == (7, 30)
    assert (load_config([]).lr, load_config([]).sft_steps, load_config([]).max_new_tokens) == (2e-3, 60, 4)
    assert load_config(["--task", "big_arithmetic", "--model", "some/model"]).max_new_tokens == 128


def test_restating_the_sum_is_no_answer_on_big_arithmetic():
    """The task's correctness compares numbers: math-verify would work "123+456" out to 579 (the
    question restated earns the reward; a run without the tool found that in about 20 steps)."""
    cfg = load_config(["--task", "big_arithmetic"]).validate()
    reward = rewards.build("correctness", **cfg.reward_params["correctness"])
    completions = ["123+456", "calc 123+456", "calc 123+456=579", "579", "calc 123+456=578"]
    assert reward(["123+456="] * 5, completions, answer=["579"] * 5) == [0.0, 0.0, 1.0, 1.0, 0.0]
    # a user's own correctness parameters still win, key by key
    cfg = from_dict({"task": "big_arithmetic", "reward_params": {"correctness": {"mode": "strict"}}})
    assert cfg.reward_params == {"correctness": {"symbolic": False, "mode": "strict"}}
    assert load_config(["--task", "arithmetic"]).reward_params == {}


def test_a_budget_too_short_for_a_four_digit_result_is_refused():
    with pytest.raises(ConfigError, match="^max_new_tokens: must be at least 18 .*calc 999\\+999=1998"):
        load_config(["--task", "big_arithmetic", "--tools", "calculator", "--max-new-tokens", "17"]).validate()


def test_after_the_default_warm_start_calls_copy_the_operands(tmp_path):
    """Step 1 samples the warm-started policy at temperature 1: most calls are exact copies of the
    prompt's sum and score 1 (with 60 warm-start steps almost none were)."""
    result = run_trainer(tmp_path, "copy", "--task", "big_arithmetic", "--tools", "calculator",
                         "--prompts-per-step", "8", "--group-size", "8", "--max-steps", "1",
                         "--flush-seconds", "0", timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    samples = read_table(tmp_path / "copy", "samples")
    calls = [(row.prompt, json.loads(row.turns)[0]) for row in samples.itertuples() if row.tool_calls >= 1]
    assert len(calls) >= 16  # the warm start shows the call in half its examples
    exact = [p for p, turn in calls if turn["model"] == f"calc {p}"]
    assert len(exact) / len(calls) >= 0.8, [turn["model"] for _, turn in calls]
    copied = samples[[row.completion.startswith(f"calc {row.prompt}") for row in samples.itertuples()]]
    assert (copied["reward"] == 1.0).mean() >= 0.9  # the tool's result is the answer the reward reads
