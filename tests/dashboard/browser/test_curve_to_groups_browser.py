"""Curve to groups in a real browser: a click on a Live curve lands on Groups at the step picked, its groups in
the ordering of the curve's metric (the KL curve: the group with the most KL first), and the address
says so (/groups?run=R&step=S&sort=kl); in English and in Chinese. A run with known figures
(tests/groups_order_helpers.py), served on its own: no trainer needed."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from browser_helpers import assert_page_whole, locale, streamlit_server, to_chinese, wait_idle
from playwright.sync_api import expect

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from groups_order_helpers import TOP, write_run  # noqa: E402

pytestmark = pytest.mark.browser
expect.set_options(timeout=60_000)
NAME = "curves"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    runs = tmp_path_factory.mktemp("curve-runs")
    write_run(runs, NAME)
    with streamlit_server(runs) as url:
        yield url


def click_curve(page, title: str) -> None:
    """Click the Live chart titled `title` at 70% of its width: its x axis runs from 0 to 3 (a step axis
    starts at zero), so that is nearest to step 2 whatever the y axis' labels take on the left."""
    chart = page.locator("[data-testid=stVegaLiteChart]").filter(has_text=title).first
    expect(chart.locator("canvas, svg").first).to_be_visible()
    wait_idle(page)
    box = chart.bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + box["width"] * 0.7, box["y"] + box["height"] * 0.5)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_click_on_the_kl_curve_opens_groups_at_that_step_by_kl(served, page, lang):
    page.goto(f"{served}/live?run={NAME}")
    wait_idle(page)
    if lang == "zh":
        to_chinese(page, locale("zh")["nav.live"])
    title = locale(lang)["panel.kl.title"]
    click_curve(page, title)
    page.wait_for_url(re.compile(r"/groups\?.*step=2.*sort=kl|/groups\?.*sort=kl.*step=2"))
    wait_idle(page)
    assert f"run={NAME}" in page.url
    picked = page.get_by_role("combobox", name=re.compile("^" + re.escape(locale(lang)["groups.pick"].split("{")[0])))
    expect(picked.first).to_have_value(re.compile(rf"^#{TOP['kl']} "))  # the group with the most KL first
    expect(page.get_by_text(locale(lang)["groups_order.explain.kl"])).to_be_visible()
    # groups 2, 3, 1 carry (9.6 + 0.4 + 0.24) / 10.44 of the step's KL tokens (groups_order_helpers.FIGURES)
    words = locale(lang)
    carried = words["groups_order.carried"].format(n=3, share="98%", name=words["groups_order.short.kl"])
    expect(page.get_by_text(carried)).to_be_visible()
    assert_page_whole(page, chinese=lang == "zh")


def test_the_address_alone_opens_an_ordering(served, page):
    """A shared link: the step and ordering come from the address, the picker shows them."""
    page.goto(f"{served}/groups?run={NAME}&step=3&sort=clip")
    wait_idle(page)
    expect(page.get_by_text(locale("en")["groups_order.explain.clip"])).to_be_visible()
    expect(page.get_by_role("combobox", name=re.compile(r"^Group \(")).first).to_have_value(re.compile(rf"^#{TOP['clip']} "))
    assert "step=3" in page.url and "sort=clip" in page.url
    assert_page_whole(page)
