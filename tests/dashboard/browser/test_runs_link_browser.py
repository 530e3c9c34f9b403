"""Links keep to what they name, in a real browser: `/?run=NAME` opens the Runs page on that run, so
tags saved there land on it (Live and Groups already did this); and a labeler named by `?labeler=` stays
the labeler after switching to Chinese. Runs written with the run-directory writer, no trainer."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from browser_helpers import assert_page_whole, choose, press, streamlit_server, to_chinese, wait_idle
from grpo_lab.rundir import annotations
from labels_helpers import fake_run
from variants_helpers import write_run

WAIT = 30_000


@pytest.fixture(scope="module")
def link_server(tmp_path_factory):
    runs = tmp_path_factory.mktemp("link-runs")
    for i in range(3):
        write_run(runs, f"k{i}", "", "", i, 0.5)
    fake_run(runs, "rated", steps=2, groups=2, completion=lambda step, group, i: f"answer {step} {group} {i}")
    with streamlit_server(runs) as url:
        yield url, runs


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_link_to_a_run_opens_runs_on_it_and_its_tags_land_there(link_server, page, traffic, lang):
    url, runs = link_server
    name = "k1"  # not the first run in the list (k2, the newest), which the page opened on before
    page.goto(f"{url}/?run={name}")
    wait_idle(page)
    if lang == "zh":
        to_chinese(page, "运行列表")
        # typed only once the switch's last rerun has ended: under load a click on the English draw's
        # form, replaced as the switch redraws, was lost (the full suite, 2026-12-05)
        assert_page_whole(page, chinese=True)
    words = {"en": ("Tags and note", "Tags of this run", "Save tags and note"),
             "zh": ("标签与备注", "本运行的标签", "保存标签与备注")}[lang]
    picker = page.get_by_role("combobox", name={"en": "Run", "zh": "训练运行"}[lang], exact=True)
    expect(picker).to_have_value(name, timeout=WAIT)
    page.locator("[data-testid=stExpander] summary").filter(has_text=words[0]).click()
    page.get_by_role("textbox", name=words[1]).fill(f"linked-{lang}")
    press(traffic, page.get_by_role("button", name=words[2]))
    expect(page.get_by_text(f"linked-{lang}", exact=False).last).to_be_visible(timeout=WAIT)
    assert annotations.read(runs / name).tags == (f"linked-{lang}",)
    assert all(annotations.read(runs / other).tags != (f"linked-{lang}",) for other in ("k0", "k1", "k2") if other != name)
    assert f"run={name}" in page.url
    assert_page_whole(page, chinese=lang == "zh")


@pytest.mark.parametrize("how", ["address", "typed"])
def test_the_labeler_from_the_address_stays_after_switching_to_chinese(link_server, page, how):
    url, _ = link_server
    page.goto(f"{url}/groups?run=rated" + ("&labeler=ann" if how == "address" else ""))
    wait_idle(page)
    field = page.get_by_label("Your name (who rates)")
    if how == "typed":  # typed once: the page puts it in the address
        field.fill("ann")
        field.press("Enter")
        wait_idle(page)
    expect(field).to_have_value("ann", timeout=WAIT)
    to_chinese(page, "组查看")
    expect(page.get_by_label("你的名字（打分人）")).to_have_value("ann", timeout=WAIT)
    assert "labeler=ann" in page.url
    assert_page_whole(page, chinese=True)  # waits out the rerun that the refilled name's address causes


@pytest.mark.parametrize("path, heading", [("live", "实时监控"), ("groups", "组查看"), ("prompt", "提示词历史")])
def test_a_run_picked_over_a_link_stays_picked_and_survives_the_language_switch(link_server, page, path, heading):
    url, _ = link_server
    page.goto(f"{url}/{path}?run=k1")
    wait_idle(page)
    picker = page.get_by_role("combobox", name="Run", exact=True)
    expect(picker).to_have_value(re.compile(r"^k1\b"), timeout=WAIT)
    choose(picker, page.get_by_role("option", name=re.compile(r"^k0\b")))
    wait_idle(page)
    expect(picker).to_have_value(re.compile(r"^k0\b"), timeout=WAIT)  # the old address did not win it back
    expect(page).to_have_url(re.compile(r"run=k0\b"), timeout=WAIT)
    to_chinese(page, heading)
    expect(page.get_by_role("combobox", name="训练运行", exact=True)).to_have_value(re.compile(r"^k0\b"), timeout=WAIT)
    assert "run=k0" in page.url
