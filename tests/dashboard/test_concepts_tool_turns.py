"""The objective page's section on tool turns: the worked group (the trainer's grpo_loss, masked as
the trainer masks), and a tools run's group turn by turn, in both languages."""

from __future__ import annotations

import importlib
import math

import pytest

from app_helpers import open_page
from grpo_lab.dashboard.concepts import tool_turns
from grpo_lab.dashboard.i18n import texts
from trl_tool_helpers import write_output

cli = importlib.import_module("grpo_lab.rundir.import")


def test_the_worked_loss_ignores_what_the_tool_said_and_would_not_if_unmasked():
    ex = tool_turns.compute()
    assert ex.loss == pytest.approx(ex.loss_other_tool_text, abs=1e-12)
    assert abs(ex.loss - ex.loss_unmasked) > 1e-3  # counting the tool's token changes the loss
    tool = ex.tokens[ex.tokens["source"] == "tool"]
    assert len(tool) == 1 and not tool["in_loss"].iloc[0] and math.isnan(tool["A"].iloc[0])
    model = ex.tokens[ex.tokens["in_loss"]]
    # one advantage per rollout, shared by every model token of every turn (G = 2: +1 and -1)
    assert model.groupby("response")["A"].unique().map(list).tolist() == [[1.0], [-1.0]]


@pytest.fixture
def runs(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(root))
    return root


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_section_shows_the_worked_group(lang, runs):
    at = open_page("grpo_objective", lang=lang)
    assert not at.exception
    words = texts(lang)
    assert words["obj.tools.title"] in [h.value for h in at.header]
    table = at.dataframe[-1].value
    assert len(table) == 8
    tool_rows = table[table[words["obj.tools.col.source"]] == words["obj.tools.source.tool"]]
    assert tool_rows[words["obj.tools.col.in_loss"]].tolist() == [words["common.no"]]
    ex = tool_turns.compute()
    result = at.success[-1].value
    assert result.count(f"{ex.loss:+.4f}") == 2 and f"{ex.loss_unmasked:+.4f}" in result


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_tools_runs_group_is_shown_turn_by_turn_with_its_credit(lang, runs, tmp_path):
    assert cli.main([str(write_output(tmp_path / "trl-out")), "--name", "tools-run", "--runs-dir", str(runs),
                     "--reward-weights", "correct=1"]) == 0
    at = open_page("grpo_objective", "tools-run", lang=lang, tools_source="run")
    assert not at.exception
    words = texts(lang)
    table = at.dataframe[-1].value
    source, A = table[words["obj.tools.col.source"]], table[words["obj.tools.col.A"]]
    # the group with a spread (2+2): o3 answers without a call (A +0.7), o4's call lost its result (A -0.7)
    assert source.tolist() == [words["obj.tools.source.model"], words["obj.tools.source.model"],
                               words["obj.tools.source.tool"]]
    assert A.iloc[:2].tolist() == [0.7, -0.7] and math.isnan(A.iloc[2])
    assert "calculator(expression=\"2+2\") → " in table[words["obj.tools.col.text"]].iloc[2]


def test_a_run_without_tools_says_so(runs, tmp_path):
    plain = [[{"role": "assistant", "content": str(i)}] for i in range(4)]
    assert cli.main([str(write_output(tmp_path / "trl-out", plain)), "--name", "plain-run", "--runs-dir", str(runs),
                     "--reward-weights", "correct=1"]) == 0
    at = open_page("grpo_objective", "plain-run", tools_source="run")
    assert any(texts("en")["obj.tools.no_turns"][:40] in i.value for i in at.info)


def test_turn_credit_reads_a_foreign_tables_odd_rows():
    """A samples table written elsewhere: arguments as a bare string, a row without a sample index."""
    import json

    import pandas as pd

    from grpo_lab.dashboard.concepts.tool_turns import turn_credit

    rows = pd.DataFrame({"sample_idx": [0, float("nan")], "advantage": [0.5, 1.0], "reward": [1.0, 1.0],
                         "turns": [json.dumps([{"model": "x", "tool": "calculator", "arguments": "1+2",
                                                "result": "3"}]), "[]"]})
    assert turn_credit(rows)["text"].tolist() == ["x", "calculator(1+2) → 3"]
