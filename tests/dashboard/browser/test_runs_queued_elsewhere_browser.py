"""Two dashboards on one runs folder with different key folders: an entry the other queued (signed
with its key) is shown on the Runs page as queued by another dashboard, with why and the ways out,
and never refused for good (before: refused as unsigned, with no way to start it). Queue here runs
the launch form's checks on it (a reward module the form refuses stays refused, the entry as it
was); Dismiss removes it. Runs written with the run-directory writer, no trainer starts."""

from __future__ import annotations

import json
import time

import pytest
from playwright.sync_api import expect

from browser_helpers import assert_page_whole, choose, press, streamlit_server, wait_idle
from grpo_lab.launching import launch_records
from variants_helpers import write_run

WAIT = 30_000  # ms: a rerun on a loaded machine can take longer than expect's default 5 s


@pytest.fixture(scope="module")
def elsewhere_server(tmp_path_factory):
    runs = tmp_path_factory.mktemp("elsewhere-runs")
    write_run(runs, "m0", "", "", 0, 0.5)
    (runs / launch_records.LAUNCH_DIR).mkdir()
    entry = {"name": "theirs", "queued": True, "argv": ["--name", "theirs", "--rewards", "pty:spawn=1"],
             "processes": 1, "queued_at": time.time(), "id": "1" * 32, "key": "f" * 16, "signature": "0" * 64}
    (runs / launch_records.LAUNCH_DIR / "theirs.json").write_text(json.dumps(entry))  # another key's: not this one's
    with streamlit_server(runs) as url:
        yield url, runs


def test_the_runs_page_says_why_another_dashboards_entry_waits_and_offers_the_ways_out(elsewhere_server, page, traffic):
    url, runs = elsewhere_server
    record = runs / launch_records.LAUNCH_DIR / "theirs.json"
    before = record.read_bytes()
    page.goto(url)
    wait_idle(page)
    choose(page.get_by_role("combobox", name="Run"), page.get_by_role("option", name="theirs", exact=True))
    wait_idle(page)
    expect(page.get_by_text("theirs was queued by another dashboard on this runs folder")).to_be_visible(timeout=WAIT)
    assert record.read_bytes() == before  # neither started nor refused by this dashboard
    assert_page_whole(page)

    press(traffic, page.get_by_role("button", name="Queue here"))  # the launch form's checks, never the entry's word
    expect(page.get_by_text("rewards: 'pty:spawn' imports module 'pty'")).to_be_visible(timeout=WAIT)
    assert record.read_bytes() == before
    wait_idle(page)
    press(traffic, page.get_by_role("button", name="Dismiss"))
    expect(page.get_by_text("Forgot the failed launch theirs.")).to_be_visible(timeout=WAIT)
    assert not record.exists()
