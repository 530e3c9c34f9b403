"""Rating in a real browser: a group rated with the keyboard lands in labels; two pages at once lose nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from browser_helpers import streamlit_server, wait_idle
from playwright.sync_api import expect

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from labels_helpers import fake_run  # noqa: E402
from trainer_helpers import wait_until  # noqa: E402

from grpo_lab.rundir import labels  # noqa: E402

pytestmark = pytest.mark.browser
expect.set_options(timeout=60_000)
KEYS = "Keyboard: 4 scores, then Enter"


@pytest.fixture(scope="module")
def rating_server(tmp_path_factory):
    runs = tmp_path_factory.mktemp("rating-runs")
    fake_run(runs, "rated", steps=2, groups=3, completion=lambda step, group, i: f"answer {step} {group} {i}")
    with streamlit_server(runs) as url:
        yield url, runs / "rated"


def open_group(page, url: str, who: str) -> None:
    page.goto(f"{url}/groups?run=rated&labeler={who}")
    wait_idle(page)
    expect(page.get_by_label(KEYS, exact=False)).to_be_visible()


def test_rate_a_group_with_the_keyboard(rating_server, browser):
    url, run = rating_server
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    open_group(page, url, "ann")
    expect(page.get_by_label("Your name (who rates)")).to_have_value("ann")  # remembered from the address
    box = page.get_by_label(KEYS, exact=False)
    box.click()
    page.keyboard.type("1011")
    page.keyboard.press("Enter")
    expect(page.get_by_text("Saved 4 ratings for step 2, group 0.")).to_be_visible()
    mine = labels.read(run).query("labeler == 'ann'")
    assert mine[["step", "group", "sample_idx", "score"]].values.tolist() == [
        [2, 0, 0, 1.0], [2, 0, 1, 0.0], [2, 0, 2, 1.0], [2, 0, 3, 1.0]]
    expect(page.get_by_role("heading", name="group 1", exact=False)).to_be_visible()  # moved on
    page.context.close()


def test_two_pages_rating_at_once_lose_nothing(rating_server, browser):
    url, run = rating_server
    pages = [browser.new_context(viewport={"width": 1400, "height": 1000}).new_page() for _ in range(2)]
    for page, who in zip(pages, ("pat", "sam")):
        open_group(page, url, who)
    for page in pages:  # both Enters before either save is checked: the two sessions write at once
        page.get_by_label(KEYS, exact=False).click()
        page.keyboard.type("0 1 0 1")
    for page in pages:
        page.keyboard.press("Enter")
    wait_until(lambda: len(labels.read(run).query("labeler in ['pat', 'sam']")) == 8, 60, "both pages' ratings")
    both = labels.read(run).query("labeler in ['pat', 'sam']")
    assert sorted(both.groupby("labeler")["score"].apply(list).to_dict().items()) == [
        ("pat", [0.0, 1.0, 0.0, 1.0]), ("sam", [0.0, 1.0, 0.0, 1.0])]
    for page in pages:
        page.context.close()


def test_enter_moves_on_from_an_ordered_step_and_says_not_trained_once(rating_server, browser):
    """Opened from a curve or a finding (the step's groups in an ordering), Enter saves and opens the
    next unrated group too; a run that does not train on ratings says so once, not again in the saved line."""
    url, run = rating_server
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(f"{url}/groups?run=rated&labeler=bob&step=2&sort=reward")
    wait_idle(page)
    expect(page.get_by_role("heading", name="group 0", exact=False)).to_be_visible()
    page.get_by_label(KEYS, exact=False).click()
    page.keyboard.type("1011")
    page.keyboard.press("Enter")
    expect(page.get_by_text("Saved 4 ratings for step 2, group 0.")).to_be_visible()
    expect(page.get_by_role("heading", name="group 1", exact=False)).to_be_visible()  # moved on
    expect(page.get_by_text("does not train on ratings", exact=False)).to_have_count(1)
    page.context.close()
