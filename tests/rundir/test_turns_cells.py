"""A `turns` cell from a samples table is input (a table may come from an import): one that is not JSON or
is nested past the parser's reach is one problem line on Groups and on the objective page's tools
section, never a RecursionError up to the page; and an empty model turn after a tool call is not
printed as an empty completion. Also: --resume reads config.json through the runs folder's JSON reader."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from grpo_lab.dashboard import i18n
from grpo_lab.dashboard.concepts.tool_turns import turn_credit
from grpo_lab.dashboard.views.groups.turns import BadCell, read_turns, turns_html
from grpo_lab.trainer.config import ConfigError, saved_config

DEEP = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError on it
GOOD = json.dumps([{"model": "calc 1+2=", "tool": "calculator", "arguments": {"": "1+2"}, "result": "3"},
                   {"model": ""}])  # the model stopped right after the tool's result


def test_a_cell_past_the_parsers_reach_is_a_bad_cell_not_a_recursion_error():
    with pytest.raises(BadCell, match="nested deeper than 64 levels"):
        read_turns(DEEP)
    with pytest.raises(BadCell, match="not valid JSON"):
        read_turns("{not json")
    assert read_turns(float("nan")) is None and read_turns(GOOD)[0]["tool"] == "calculator"


def test_turn_credit_marks_the_bad_row_and_keeps_the_others():
    rows = pd.DataFrame({"sample_idx": [0, 1], "advantage": [0.5, -0.5], "reward": [1.0, 0.0], "turns": [GOOD, DEEP]})
    credit = turn_credit(rows)
    assert credit.loc[credit["source"] == "unreadable", "sample_idx"].tolist() == [1]
    assert credit.loc[credit["source"] == "tool", "text"].tolist() == ["calculator(1+2) → 3"]


def test_no_empty_marker_after_a_tool_call():
    out = turns_html(json.loads(GOOD), markers=True)
    assert out.count('class="grpo-turn-model"') == 1 and "∅" not in out
    assert "∅" in turns_html([{"model": ""}], markers=True)  # an empty rollout still says it is empty


def _groups_turns(lang: str) -> None:
    import pandas as pd  # noqa: F811 - AppTest runs this function's body on its own
    import streamlit as st

    from grpo_lab.dashboard.views.groups import turns

    st.session_state["lang"] = lang
    good = '[{"model": "calc 1+2=", "tool": "calculator", "arguments": {"": "1+2"}, "result": "3"}]'
    turns.show(pd.DataFrame({"sample_idx": [0, 1], "advantage": [0.5, -0.5], "turns": [good, "[" * 100_000]}),
               markers=False)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_groups_shows_one_line_for_the_bad_cell_and_the_other_rollout(lang):
    at = AppTest.from_function(_groups_turns, args=(lang,), default_timeout=60)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    said = " ".join(w.value for w in at.warning)
    assert i18n.texts(lang)["turns_cell.unreadable"].format(samples="1") in said
    assert "calculator(1+2)" in " ".join(e.proto.body for e in at.get("html"))


def test_resume_reads_config_json_through_the_runs_folders_reader(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "config.json").write_text('{"a": ' * 100_000 + "1" + "}" * 100_000)
    with pytest.raises(ConfigError, match=r"^resume: r/config.json is nested deeper than 64 levels"):
        saved_config({"name": "r", "runs_dir": str(tmp_path)})
    (run / "config.json").write_text(json.dumps({"seed": 3, "sources": {"seed": "cli"}}))
    assert saved_config({"name": "r", "runs_dir": str(tmp_path)}) == ({"seed": 3}, {"seed": "cli"})
