"""Rescores in a real browser: a rescore (grpo-lab-rescore) shows on Groups beside the run's own rewards and
advantages, a changed reward tinted, in English and in Chinese; the page's form starts another one. The run
is a verl dump imported (no trainer needed), rescored with a length reward before the server starts."""

from __future__ import annotations

import re

import pytest
from browser_helpers import assert_page_whole, literal, locale, press, streamlit_server, to_chinese, wait_idle
from run_sources import imported_verl_run
from playwright.sync_api import expect

from grpo_lab.finished_runs import rescore
from grpo_lab.rundir import rescores

pytestmark = pytest.mark.browser
expect.set_options(timeout=60_000)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("rescore-browser")
    imported_verl_run(root)
    rescore.rescore(root / "runs" / "verl", rescore.parse_request("length", params={"length": {"max_len": 1}},
                                                                  name="short"))
    with streamlit_server(root / "runs") as url:
        yield url, root / "runs" / "verl"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_rescore_shows_beside_the_runs_rewards_on_groups(served, page, traffic, lang):
    url, run = served
    page.goto(f"{url}/groups?run=verl")
    wait_idle(page)
    if lang == "zh":
        to_chinese(page, locale("zh")["nav.groups"])
    words = locale(lang)
    table = page.locator("table.grpo-rescore")
    expect(table).to_be_visible()
    for key in ("rescore.col.run_reward", "rescore.col.run_a", "rescore.col.reward", "rescore.col.a"):
        expect(table.locator("th", has_text=words[key]).first).to_be_visible()
    changed = table.locator("tr[data-rescore*=changed]").first  # length scores "10" where verl's score was 1 or 0
    expect(changed).to_be_visible()
    tint = changed.locator("td").nth(3).evaluate("e => getComputedStyle(e).backgroundColor")
    r, g, b = (int(v) for v in re.findall(r"\d+", tint)[:3])
    assert r > b and g > b, tint  # yellow: the reward the rescore changed
    expect(page.get_by_text(words["rescore.changed"], exact=True)).to_be_visible()  # the summary's metric
    expect(page.get_by_text(literal("groups.match", lang))).to_be_visible()  # the page drawn to its end in `lang`
    assert_page_whole(page, chinese=lang == "zh")

    # another rescore, from the page's form
    page.get_by_text(words["rescore.new"], exact=True).click()
    spec = page.get_by_label(words["rescore.rewards"])
    spec.fill("correctness")
    page.get_by_label(words["rescore.name"]).fill(f"form-{lang}")
    press(traffic, page.get_by_role("button", name=words["rescore.start"]))
    expect(page.get_by_text(literal("rescore.done", lang), exact=False)).to_be_visible()
    wait_idle(page)
    assert rescores.read_summary(run, f"form-{lang}")["rewards"] == {"correctness": 1.0}
    assert_page_whole(page, chinese=lang == "zh")
