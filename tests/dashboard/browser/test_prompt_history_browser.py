"""A prompt's history in a real browser, in English and Chinese: a group on Groups opens its prompt's history in
one click (the address names run and prompt), and Compare shows two runs' completions to one prompt
side by side, each with the rewards and advantages its run logged."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from browser_helpers import assert_page_whole, click_until, locale, main_text, to_chinese, wait_idle
from playwright.sync_api import expect
from trainer_helpers import read_table

pytestmark = pytest.mark.browser
expect.set_options(timeout=60_000)
G = 4  # the server's runs: --group-size 4 (tests/dashboard/browser/conftest.py SMALL)


def open_in(page, address: str, lang: str, title_key: str) -> dict[str, str]:
    """The page at `address`, switched to `lang`; returns that language's texts."""
    page.goto(address)
    wait_idle(page)
    if lang == "zh":
        to_chinese(page, locale("zh")[title_key])
    return locale(lang)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_prompts_history_opens_from_a_group(server, page, lang):
    url, runs = server
    words = open_in(page, f"{url}/groups?run=alpha", lang, "nav.groups")
    heading = page.locator("h3").filter(has=page.locator("code")).first  # groups.heading, the prompt id in code
    expect(heading).to_be_visible()
    prompt_id = heading.locator("code").inner_text()
    click_until(page, page.get_by_text(words["prompt_history.open"]),
                page.locator("h1").filter(has_text=words["prompt_history.title"]))
    wait_idle(page)
    assert f"/prompt?run=alpha&prompt={quote(prompt_id, safe='')}" in page.url.replace("%2b", "%2B")
    expect(page.locator("h3").filter(has_text=prompt_id)).to_be_visible()  # prompt_history.heading

    samples = read_table(runs / "alpha", "samples")
    mine = samples[samples["prompt_id"] == prompt_id]
    expect(page.get_by_text(words["prompt_history.draws"], exact=True)).to_be_visible()
    assert str(mine.groupby(["step", "group"]).ngroups) in main_text(page)
    # the newest draw's G completions, each with the advantage its step gave it
    newest = mine[mine["step"] == mine["step"].max()].sort_values(["advantage", "sample_idx"], ascending=[False, True])
    table = page.locator("table.grpo-responses")
    expect(table.locator("tbody tr")).to_have_count(G)
    a_i = table.locator("thead th").all_inner_texts().index("A_i")
    shown = [tr.locator("td").nth(a_i).inner_text() for tr in table.locator("tbody tr").all()]
    assert shown == [f"{a:+.3f}" for a in newest["advantage"]]
    assert_page_whole(page, chinese=lang == "zh")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_compare_shows_two_runs_answers_to_one_prompt(server, page, lang):
    url, runs = server
    words = open_in(page, f"{url}/compare?runs=alpha,beta", lang, "nav.compare")
    expect(page.get_by_text(words["compare_completions.heading"])).to_be_visible()
    tables = page.locator("table.grpo-responses")
    expect(tables).to_have_count(2)
    key = page.locator("div.grpo-prompt").first.inner_text().strip()  # the question the runs did most differently on
    text = main_text(page)
    drawn = {name: read_table(runs / name, "samples") for name in ("alpha", "beta")}
    drawn = {name: s[s["prompt"].str.strip() == key] for name, s in drawn.items()}
    # blank step: every run at the latest step all of them reached, each its draw nearest it (earlier on a tie)
    common = min(int(d["step"].max()) for d in drawn.values())
    for name, table in zip(("alpha", "beta"), tables.all()):
        mine = drawn[name]
        at = min(sorted(set(mine["step"])), key=lambda s: (abs(s - common), s))
        newest = mine[mine["step"] == at].sort_values(["advantage", "sample_idx"], ascending=[False, True])
        assert re.search(rf"{name} · \D*{newest['step'].iloc[0]}\D", text)  # compare_completions.run_line
        expect(table.locator("tbody tr")).to_have_count(G)
        head = table.locator("thead th").all_inner_texts()
        rows = [tr.locator("td").all_inner_texts() for tr in table.locator("tbody tr").all()]
        assert [r[head.index("A_i")] for r in rows] == [f"{a:+.3f}" for a in newest["advantage"]]
        assert [r[head.index(words["col.reward"])] for r in rows] == [f"{v:.3f}" for v in newest["reward"]]
    assert_page_whole(page, chinese=lang == "zh")
