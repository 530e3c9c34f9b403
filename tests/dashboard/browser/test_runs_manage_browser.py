"""Runs management in a real browser: tag a run, filter the list by the tag, delete the run (its
folder moves to .trash/ on disk), restore it from the Trash view; then the same page in Chinese.
Runs written with the run-directory writer (tests/variants_helpers.py), no trainer."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from browser_helpers import assert_page_whole, choose, press, streamlit_server, to_chinese, wait_idle
from grpo_lab.rundir import annotations
from trainer_helpers import wait_until
from variants_helpers import write_run

WAIT = 30_000  # ms: a rerun on a loaded machine can take longer than expect's default 5 s


@pytest.fixture(scope="module")
def manage_server(tmp_path_factory):
    runs = tmp_path_factory.mktemp("manage-runs")
    for i in range(3):
        write_run(runs, f"m{i}", "", "", i, 0.5)
    with streamlit_server(runs) as url:
        yield url, runs


def test_tag_filter_delete_and_restore_a_run(manage_server, page, traffic):
    url, runs = manage_server
    page.goto(url)
    wait_idle(page)
    choose(page.get_by_role("combobox", name="Run"), page.get_by_role("option", name="m1", exact=True))
    # the rerun that draws m1's form can start late on a loaded machine: typed into the last run's
    # form, the save goes to that run (seen once in a full suite); m1's links mean m1's form is drawn
    expect(page.locator("a[href='live?run=m1']")).to_be_visible(timeout=WAIT)
    wait_idle(page)
    page.locator("[data-testid=stExpander] summary").filter(has_text="Tags and note").click()
    page.get_by_role("textbox", name="Tags of this run").fill("keep best")
    page.get_by_role("textbox", name="Note").fill("the one to keep")
    press(traffic, page.get_by_role("button", name="Save tags and note"))
    expect(page.get_by_text("Saved the tags and note of m1 at")).to_be_visible(timeout=WAIT)
    assert annotations.read(runs / "m1").tags == ("keep", "best")
    wait_idle(page)

    choose(page.locator("[data-testid=stMultiSelect]").filter(has_text="Tags"),
           page.get_by_role("option", name="keep", exact=True))
    expect(page.get_by_text("Runs 1–1 of the 1 that match (3 in all)")).to_be_visible(timeout=WAIT)
    page.keyboard.press("Escape")
    wait_idle(page)
    assert_page_whole(page)

    press(traffic, page.get_by_role("button", name=re.compile("Delete")))
    expect(page.get_by_text("Moved m1 to the trash.")).to_be_visible(timeout=WAIT)
    assert not (runs / "m1").exists()
    assert [p.name.split("@")[0] for p in (runs / ".trash").iterdir() if "@" in p.name] == ["m1"]
    expect(page.get_by_text("Runs 1–2 of the 2 that match (2 in all)")).to_be_visible(timeout=WAIT)  # no tag left to filter by

    page.get_by_text("Trash (1)").click()
    expect(page.get_by_text("Deleted runs wait in")).to_be_visible(timeout=WAIT)
    press(traffic, page.get_by_role("button", name=re.compile("Restore")))
    expect(page.get_by_text("Restored m1 from the trash.")).to_be_visible(timeout=WAIT)
    wait_until(lambda: (runs / "m1" / "annotations.json").is_file(), 10, "m1 back in the runs folder")
    expect(page.get_by_text("The trash is empty.")).to_be_visible(timeout=WAIT)
    assert_page_whole(page)

    to_chinese(page, "运行列表")
    expect(page.get_by_text("回收站是空的。")).to_be_visible(timeout=WAIT)
    page.get_by_text("运行", exact=True).click()
    expect(page.get_by_text("第 1–3 个，共 3 个符合条件（全部 3 个）")).to_be_visible(timeout=WAIT)
    wait_idle(page)
    assert_page_whole(page, chinese=True)
