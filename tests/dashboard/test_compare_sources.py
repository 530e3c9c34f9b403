"""Compare across sources: prompts by what they ask, rewards by their function's name, an imported
run's config as it was written, and a one-step curve drawn as a point."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from grpo_lab.dashboard.views import charts
from grpo_lab.dashboard.views.compare import compare_view
from grpo_lab.rundir.chat import prompt_key
from grpo_lab.rundir.reader import RunInfo


def test_a_native_chat_prompt_and_an_imported_conversation_are_the_same_prompt():
    native = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nTom has 3 apples.<|im_end|>\n"
              "<|im_start|>assistant\n")
    imported = "system: Be brief.\nuser: Tom has 3 apples."
    assert prompt_key(native) == prompt_key(imported) == "Tom has 3 apples."
    assert prompt_key(" 3+4= ") == "3+4="
    assert prompt_key("user: a") != prompt_key("user: b")


def test_reward_metrics_are_matched_by_the_functions_name():
    assert compare_view.reward_name("rewards/trl.rewards:accuracy_reward/mean") == "rewards/accuracy_reward/mean"
    assert compare_view.reward_name("eval/rewards/m:f/mean") == "eval/rewards/f/mean"
    assert compare_view.reward_name("kl/mean") == "kl/mean"


def test_an_imported_runs_config_is_not_filled_with_our_defaults():
    native = RunInfo("ours", Path("ours"), None, {"algo": "grpo", "sft_steps": 60, "beta": 0.04})
    trl = RunInfo("trl", Path("trl"), None, {"algo": "grpo", "source": "trl", "beta": 0.04})
    diff = compare_view.config_diff([native, trl]).set_index("option")
    assert diff.loc["sft_steps", "trl"] == "—" and "beta" not in diff.index


def test_a_series_of_one_point_gets_its_point_marked():
    one = pd.DataFrame({"x": [1], "series": ["trl"], "raw": [0.5], "smooth": [0.5]})
    many = pd.DataFrame({"x": [1, 2], "series": ["a", "a"], "raw": [0.5, 0.6], "smooth": [0.5, 0.6]})
    marks = [layer["mark"] for layer in charts.line_chart(one, title="t", x_title="x", style=charts.LineStyle(smoothing=False))["layer"]]
    assert any(m.get("point") for m in marks)
    marks = [layer["mark"] for layer in charts.line_chart(many, title="t", x_title="x", style=charts.LineStyle(smoothing=False))["layer"]]
    assert not any(m.get("point") for m in marks)


def test_the_config_diff_says_where_a_value_came_from_in_the_pages_language(monkeypatch):
    a = RunInfo("a", Path("a"), None, {"beta": 0.0, "lr": 2e-3, "sources": {"beta": "command line", "lr": "task default (arithmetic)"}})
    b = RunInfo("b", Path("b"), None, {"beta": 0.04, "lr": 1e-3, "sources": {"beta": "default", "lr": "config file"}})
    monkeypatch.setitem(st.session_state, "lang", "zh")
    diff = compare_view.config_diff([a, b]).set_index("option")
    assert diff.loc["beta", "a"] == "0.0  (命令行)" and diff.loc["beta", "b"] == "0.04  (默认值)"
    assert diff.loc["lr", "a"] == "0.002  (任务默认值 (arithmetic))" and diff.loc["lr", "b"] == "0.001  (配置文件)"
