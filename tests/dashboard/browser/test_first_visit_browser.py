"""What a first visit meets in a real browser: an address naming a run that is not there yet (just
started from Runs) says so and waits for it, never showing another run nor rewriting the address; the
language chosen stays in the address, so a reload and a page link keep it."""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
from playwright.sync_api import expect

from browser_helpers import choose, literal, locale, streamlit_server, to_chinese, wait_idle
from grpo_lab.launching import launch_records
from grpo_lab.rundir.layout import RunPaths, write_json_atomic
from grpo_lab.rundir.writer import RunWriter
from grpo_lab.trainer.config import Config
from variants_helpers import write_run


def write_sampler_run(root, name: str, steps: int = 4) -> None:
    """A finished run whose sampler is its trainer: mismatch/* of float round-off only."""
    paths = RunPaths(root / name)
    paths.root.mkdir(parents=True)
    write_json_atomic(paths.config, Config(name=name, runs_dir=str(root), max_steps=steps).run_record())
    write_json_atomic(paths.status, {"state": "finished", "step": steps, "total_steps": steps, "name": name,
                                     "started_at": 1.7e9, "updated_at": 1.7e9 + 100})
    writer = RunWriter(paths, level="scalars", flush_seconds=0)
    writer.log("scalars", {"step": list(range(1, steps + 1)), "time": [1.7e9 + s for s in range(steps)],
                           "wall_s": [2.0 * s for s in range(steps)], "reward/mean": [0.5] * steps,
                           "mismatch/logp_diff_mean": [1e-7] * steps, "mismatch/logp_diff_max": [3e-6] * steps,
                           "mismatch/out_frac": [0.0] * steps})
    writer.close()


@pytest.fixture(scope="module")
def visit_server(tmp_path_factory):
    runs = tmp_path_factory.mktemp("visit-runs")
    write_run(runs, "k0", "", "", 0, 0.5, steps=3)
    write_sampler_run(runs, "same-sampler")
    (runs / launch_records.LAUNCH_DIR).mkdir()  # a launch with no run folder yet (queued by another dashboard: never starts)
    entry = {"name": "later", "queued": True, "argv": ["--name", "later"], "processes": 1, "queued_at": time.time(),
             "id": "1" * 32, "key": "f" * 16, "signature": "0" * 64}
    (runs / launch_records.LAUNCH_DIR / "later.json").write_text(json.dumps(entry))
    with streamlit_server(runs) as url:
        yield url, runs


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_address_naming_a_run_not_there_yet_waits_for_it(visit_server, page, lang):
    url, runs = visit_server
    name = f"fresh-{lang}"
    page.goto(f"{url}/live?run={name}" + ("&lang=zh" if lang == "zh" else ""))
    wait_idle(page)
    expect(page.locator("h1")).to_have_text(re.compile(re.escape(locale(lang)["nav.live"])))
    expect(page.get_by_text(literal("ui.run_waiting", lang)[:20]).first).to_be_visible()
    page.wait_for_timeout(3000)  # a look again or two: still waiting, on the address it was given
    assert f"run={name}" in page.url and "run=k0" not in page.url
    expect(page.get_by_role("combobox", name=locale(lang)["run.pick"], exact=True)).to_have_count(0)
    write_run(runs, name, "", "", 1, 0.5, steps=3)  # the trainer has started: its folder is there
    picker = page.get_by_role("combobox", name=locale(lang)["run.pick"], exact=True)
    expect(picker).to_have_value(re.compile(rf"^{name}\b"))
    assert f"run={name}" in page.url

    # a run whose sampler is its trainer: said in one line, not charts of 1e-6 noise
    page.goto(f"{url}/live?run=same-sampler" + ("&lang=zh" if lang == "zh" else ""))
    wait_idle(page)
    expect(page.get_by_text(literal("live.sampler_no_gap", lang)[:12]).first).to_be_visible()
    expect(page.get_by_text("3e-06").first).to_be_visible()
    section = locale(lang)["live.section.sampler"]
    expect(page.get_by_test_id("stExpander").filter(has_text=section)).to_have_count(0)


def test_runs_links_a_launch_without_its_folder_yet_to_its_live(visit_server, page):
    url, _ = visit_server
    page.goto(url)
    wait_idle(page)
    choose(page.get_by_role("combobox", name="Run"), page.get_by_role("option", name="later", exact=True))
    wait_idle(page)
    link = page.get_by_test_id("stPageLink").filter(has_text="Live")
    expect(link).to_be_visible()
    link.click()
    expect(page.get_by_text(literal("ui.run_waiting")[:20]).first).to_be_visible()
    assert "run=later" in page.url


def test_the_run_picker_says_the_state_live_says(visit_server, page):
    """A run going from starting to running: the picker beside its name follows State, not the listing."""
    url, runs = visit_server
    write_run(runs, "warming", "", "", 2, 0.5, steps=3)
    path = runs / "warming" / "status.json"
    trainer = subprocess.Popen(["sleep", "300"])  # an active state needs a live process behind it
    try:
        status = {**json.loads(path.read_text()), "pid": trainer.pid}
        write_json_atomic(path, {**status, "state": "starting"})
        page.goto(f"{url}/live?run=warming")
        wait_idle(page)
        picker = page.get_by_role("combobox", name="Run", exact=True)
        expect(picker).to_have_value(re.compile(r"starting"))
        write_json_atomic(path, {**status, "state": "running"})
        expect(picker).to_have_value(re.compile(r"running"))
        write_json_atomic(path, {**status, "state": "finished"})  # no timer left behind
        expect(picker).to_have_value(re.compile(r"finished"))
    finally:
        trainer.kill()
        trainer.wait()


def test_the_language_stays_in_the_address_across_reload_and_links(visit_server, page):
    url, _ = visit_server
    zh = locale("zh")
    page.goto(f"{url}/live?run=k0")
    wait_idle(page)
    to_chinese(page, zh["nav.live"])
    expect(page).to_have_url(re.compile(r"lang=zh"))
    page.reload()
    wait_idle(page)
    expect(page.locator("h1")).to_have_text(re.compile(re.escape(zh["nav.live"])))
    page.goto(f"{url}/groups?run=k0&lang=zh")  # a typed address with the language
    wait_idle(page)
    expect(page.locator("h1")).to_have_text(re.compile(re.escape(zh["nav.groups"])))
    page.get_by_role("link", name=zh["nav.runs"]).first.click()  # the sidebar's link carries no query
    expect(page.locator("h1")).to_have_text(re.compile(re.escape(zh["nav.runs"])))
    expect(page).to_have_url(re.compile(r"lang=zh"))
    page.reload()
    wait_idle(page)
    expect(page.locator("h1")).to_have_text(re.compile(re.escape(zh["nav.runs"])))
    page.get_by_text("English", exact=True).click()  # back to English: the address forgets the language
    expect(page.locator("h1")).to_have_text(re.compile(re.escape(locale("en")["nav.runs"])))
    expect(page).not_to_have_url(re.compile(r"lang="))
