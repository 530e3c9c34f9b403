"""Fork from step S in a real browser: on Runs, pick step 3 of a trained run, press "Fork from step 3", start
the form (filled with the parent's options): a trainer forks it and trains steps 4 to 6, and Runs names
the family. Then Live in Chinese: the button and the form in Chinese."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from browser_helpers import (assert_page_whole, choose, locale, press, stop_trainers, streamlit_server, to_chinese,
                             wait_idle)
from grpo_lab.rundir.status import read_status
from shared_runs import copy_run, grpo_run  # noqa: F401  (a fixture)
from trainer_helpers import read_table, wait_until

WAIT = 30_000  # ms: a rerun on a loaded machine can take longer than expect's default 5 s


@pytest.fixture(scope="module")
def fork_server(grpo_run, tmp_path_factory):
    runs = tmp_path_factory.mktemp("fork-runs")
    copy_run(grpo_run, runs, "parent")  # 6 steps, checkpoints of steps 3 and 6
    with streamlit_server(runs) as url:
        yield url, runs
    stop_trainers(runs)


def test_fork_from_a_step_on_runs_then_live_in_chinese(fork_server, page, traffic):
    url, runs = fork_server
    page.goto(f"{url}/?run=parent")
    wait_idle(page)
    step = page.get_by_role("combobox", name="Fork step")
    expect(step).to_have_value("6", timeout=WAIT)  # the newest forkable step first
    choose(step, page.get_by_role("option", name="3", exact=True))
    press(traffic, page.get_by_role("button", name="🍴 Fork from step 3"))
    expect(page.get_by_text("A new run from parent's checkpoint of step 3")).to_be_visible(timeout=WAIT)
    fork_form = page.locator("[data-testid=stForm]").filter(has_text="Start the fork from step 3")
    expect(fork_form.get_by_label("Run name", exact=True)).to_have_value("parent-fork-3")
    expect(fork_form.get_by_label("Learning rate", exact=True)).to_have_value("2e-3")  # the parent's
    press(traffic, page.get_by_role("button", name="Start the fork from step 3"))

    child = runs / "parent-fork-3"  # the launcher's trainer: --fork-from parent --fork-step 3
    wait_until(lambda: (read_status(child / "status.json") or {}).get("state") == "finished", 240,
               "the fork to finish", every=1.0)
    config = json.loads((child / "config.json").read_text())
    assert (config["fork_from"], config["fork_step"]) == ("parent", 3)
    assert read_table(child, "scalars")["step"].tolist() == [4, 5, 6]  # its own steps, from the fork's on
    page.goto(f"{url}/?run=parent-fork-3")
    wait_idle(page)
    expect(page.get_by_text("Forked from parent at step 3.")).to_be_visible(timeout=WAIT)
    assert_page_whole(page)

    page.goto(f"{url}/live?run=parent")
    wait_idle(page)
    zh = locale("zh")
    to_chinese(page, zh["nav.live"])
    expect(page.get_by_text("分叉：parent-fork-3（第 3 步）。")).to_be_visible(timeout=WAIT)
    press(traffic, page.get_by_role("button", name="🍴 从第 6 步分叉"))
    expect(page.get_by_text("从 parent 第 6 步的检查点开始一个新运行")).to_be_visible(timeout=WAIT)
    expect(page.get_by_role("button", name="从第 6 步开始分叉")).to_be_visible(timeout=WAIT)
    assert_page_whole(page, chinese=True)
