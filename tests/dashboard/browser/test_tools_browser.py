"""A run with the calculator tool (--task big_arithmetic --tools calculator) on the Groups page in a
real browser, in both languages: each rollout shown as its turns, its tool calls and results set
apart from the model's text, and the group's table with its tool calls and tool errors."""

from __future__ import annotations


import pytest
from browser_helpers import assert_page_whole, locale, open_groups
from playwright.sync_api import expect
from trainer_helpers import SMALL, read_table, run_trainer

pytestmark = pytest.mark.browser
NAME = "tools-run"
expect.set_options(timeout=60_000)


@pytest.fixture(scope="module")
def tools_run(server):
    url, runs = server
    result = run_trainer(runs, NAME, *SMALL, "--task", "big_arithmetic", "--tools", "calculator", "--max-steps", "1",
                         "--max-new-tokens", "20", "--sft-steps", "80")  # 80: the warm start teaches the calc tag
    assert result.returncode == 0, result.stderr[-2000:]
    samples = read_table(runs / NAME, "samples")
    assert samples["tool_calls"].sum() > 0  # the warm start taught the tag: there are calls to show
    return url, samples


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_groups_shows_a_rollouts_turns_and_tool_calls(tools_run, page, lang):
    url, samples = tools_run
    step, group = open_groups(page, url, NAME, lang)
    rows = samples[(samples["step"] == step) & (samples["group"] == group)]
    rows = rows.sort_values(["advantage", "sample_idx"], ascending=[False, True])  # the page's order

    table = page.locator("table.grpo-responses")
    expect(table.locator("thead th").filter(has_text=locale(lang)["col.tool_errors"])).to_have_count(1)
    head = table.locator("thead th").all_inner_texts()
    calls_at, errors_at = head.index(locale(lang)["col.tool_calls"]), head.index(locale(lang)["col.tool_errors"])
    shown = [tr.locator("td").all_inner_texts() for tr in table.locator("tbody tr").all()]
    assert [int(r[calls_at]) for r in shown] == rows["tool_calls"].tolist()
    assert [int(r[errors_at]) for r in shown] == rows["tool_errors"].tolist()

    expect(page.get_by_text(locale(lang)["turns.heading"])).to_be_visible()
    expect(page.locator("div.grpo-turns")).to_have_count(len(rows))
    print(f"group {step}/{group}: {int(rows['tool_calls'].sum())} tool calls shown")  # (pytest -s: what was checked)
    calls = page.locator("div.grpo-turn-tool, div.grpo-turn-error")
    expect(calls).to_have_count(int(rows["tool_calls"].sum()))
    for i, text in enumerate(calls.all_inner_texts()):
        assert text.startswith("🔧 calculator(") and " → " in text, (i, text)
    assert_page_whole(page, chinese=lang == "zh")
