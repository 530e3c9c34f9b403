"""The reward-hacking lens in a real browser, in English and in Chinese: Live's "Is the reward honest?"
section opens onto its curves and what they mean, and a click on one of them opens Groups at that step with
its groups ordered by hacking suspects, the gamed group first. A run whose reward is gamed in a known way
(tests/honesty_helpers.py), served on its own: no trainer needed."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from browser_helpers import assert_page_whole, locale, open_expander, streamlit_server, to_chinese, wait_idle
from playwright.sync_api import expect

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from honesty_helpers import HACKED, SUSPECT, write_run  # noqa: E402

pytestmark = pytest.mark.browser
expect.set_options(timeout=60_000)
NAME = "gamed"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    runs = tmp_path_factory.mktemp("honesty-runs")
    write_run(runs, NAME)
    with streamlit_server(runs) as url:
        yield url


def section_title(words: dict[str, str]) -> str:
    panels = " · ".join(words[f"panel.{p}.title"] for p in ("honesty_sign", "honesty_share", "honesty_length",
                                                             "honesty_strict", "honesty_solved", "honesty_spread"))
    return words["live.honesty_heading"].format(panels=panels)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_section_explains_its_curves_and_a_click_opens_the_suspects(served, page, lang):
    words = locale(lang)
    page.goto(f"{served}/live?run={NAME}")
    wait_idle(page)
    if lang == "zh":
        to_chinese(page, words["nav.live"])
    box = open_expander(page, section_title(words))
    intro = words["live.honesty_intro"].split("**")[0].strip()
    expect(box.get_by_text(intro, exact=False)).to_be_visible()
    chart = box.locator("[data-testid=stVegaLiteChart]").filter(has_text=words["panel.honesty_sign.title"]).first
    expect(chart.locator("canvas, svg").first).to_be_visible()
    wait_idle(page)
    assert_page_whole(page, chinese=lang == "zh")
    chart.scroll_into_view_if_needed()
    bounds = chart.bounding_box()
    assert bounds is not None
    page.mouse.click(bounds["x"] + bounds["width"] * 0.6, bounds["y"] + bounds["height"] * 0.5)
    page.wait_for_url(re.compile(r"/groups\?.*sort=suspects"))
    wait_idle(page)
    expect(page.get_by_text(words["groups_order.explain.suspects"])).to_be_visible()
    step = int(re.search(r"step=(\d+)", page.url).group(1))
    picked = page.get_by_role("combobox", name=re.compile("^" + re.escape(words["groups.pick"].split("{")[0])))
    assert step >= HACKED  # 60% of the way along the step axis, where the planted group games the reward
    expect(picked.first).to_have_value(re.compile(rf"^#{SUSPECT} "))
