"""Late ratings in a real browser, in English and Chinese: a run that trains on
ratings and has already scored step 2 says so before a rating of step 2 and after it, keeps the rating
and marks it late; a run waiting on its first step shows one calm line and its completions before a
name is typed (the Runs page's "waiting for ratings": tests/rewards/test_ratings_late.py, its table is a canvas)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from browser_helpers import locale, streamlit_server, to_chinese, wait_idle
from playwright.sync_api import expect

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from labels_helpers import fake_run  # noqa: E402

from grpo_lab.rundir import labels  # noqa: E402

pytestmark = pytest.mark.browser
expect.set_options(timeout=60_000)


@pytest.fixture(scope="module")
def late_server(tmp_path_factory):
    runs = tmp_path_factory.mktemp("late-runs")
    for name in ("hitl-en", "hitl-zh"):
        run = fake_run(runs, name, completion=lambda step, group, i: f"answer {step} {group} {i}")
        config = json.loads((run / "config.json").read_text())
        (run / "config.json").write_text(json.dumps({**config, "rewards": {"human": 1.0}}))
        labels.close_step(run, 2, 1.0)  # the trainer scored step 2 long ago; the run has ended
    last = fake_run(runs, "hitl-last", steps=1, groups=1, completion=lambda step, group, i: f"only {i}")
    config = json.loads((last / "config.json").read_text())
    (last / "config.json").write_text(json.dumps({**config, "rewards": {"human": 1.0}}))
    labels.close_step(last, 1, 1.0)
    first = runs / "first"
    first.mkdir()
    (first / "config.json").write_text(json.dumps({"name": "first", "algo": "grpo", "group_size": 2, "model": "tiny",
                                                   "max_steps": 3, "rewards": {"human": 1.0}}))
    (first / "status.json").write_text(json.dumps({"state": "running", "step": 0, "total_steps": 3, "name": "first",
                                                   "pid": os.getpid(), "waiting": {"for": "ratings", "step": 1}}))
    labels.set_waiting(first, step=1, groups=[{"group": 0, "prompt_id": "0+1", "prompt": "0+1=",
                                               "completions": ["one", "two"]}])
    with streamlit_server(runs) as url:
        yield url, runs


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_rating_of_a_trained_step_is_said_late_before_and_after(late_server, page, lang):
    url, runs = late_server
    name = f"hitl-{lang}"
    page.goto(f"{url}/groups?run={name}&labeler=ann")
    wait_idle(page)
    if lang == "zh":
        to_chinese(page, locale("zh")["nav.groups"])
    # the words between the step and the time ("was trained at"): "Step " alone matches any step heading
    before = locale(lang)["rating_late.late"].split("{step}")[1].split("{time}")[0].strip()
    expect(page.get_by_text(before, exact=False).first).to_be_visible()
    box = page.get_by_label(locale(lang)["rating.keys"].split("{n}")[0], exact=False)
    box.click()
    page.keyboard.type("1011")
    page.keyboard.press("Enter")
    after = locale(lang)["rating_late.saved_late"].split("{step}")[0]
    expect(page.get_by_text(after, exact=False).first).to_be_visible()
    rated = labels.read(runs / name)
    assert len(rated) == 4 and labels.late(rated, runs / name).all()  # kept, and marked late


def test_the_last_late_rating_keeps_its_confirmation(late_server, page):
    """Rating the run's last unrated group (late) says both: the rating is late, and nothing is left
    to rate (that line once replaced the confirmation)."""
    url, runs = late_server
    page.goto(f"{url}/groups?run=hitl-last&labeler=bo")
    wait_idle(page)
    page.get_by_label(locale("en")["rating.keys"].split("{n}")[0], exact=False).click()
    page.keyboard.type("1011")
    page.keyboard.press("Enter")
    saved = page.locator("[data-testid=stAlertContentSuccess]")
    expect(saved.filter(has_text=locale("en")["rating_late.saved_late"].split("{step}")[0])).to_be_visible()
    expect(saved.filter(has_text=locale("en")["rating.all_done"])).to_be_visible()
    assert len(labels.read(runs / "hitl-last")) == 4


def test_a_run_waiting_on_its_first_step_is_calm_and_readable(late_server, page):
    url, _ = late_server
    page.goto(f"{url}/groups?run=first")
    wait_idle(page)
    expect(page.get_by_text("The trainer waits for ratings of step 1").first).to_be_visible()
    expect(page.locator("[data-testid=stMarkdownContainer] p").filter(has_text="two").first).to_be_visible()  # a completion, before a name is typed
    assert page.locator("[data-testid=stAlertContentWarning]").count() == 0  # no "no samples" warnings
