"""A Runs page with no run active shows a run started elsewhere (the command line, another dashboard)
within seconds, with no click: it watches the runs folder (runs_view.watch). Runs written with the
run-directory writer; no trainer starts."""

from __future__ import annotations

import json
import os

import pytest
from playwright.sync_api import expect

from browser_helpers import locale, streamlit_server, wait_idle
from grpo_lab.rundir.layout import write_json_atomic
from variants_helpers import write_run

SHOWN_WITHIN_MS = 15_000  # the watch looks every 3 s; the shared listing is at most 1 s old


@pytest.fixture(scope="module")
def quiet_server(tmp_path_factory):
    """A dashboard over one finished run: nothing active, so nothing refreshes the list on a timer."""
    runs = tmp_path_factory.mktemp("quiet-runs")
    write_run(runs, "first", "", "", 0, 0.5, steps=3)
    with streamlit_server(runs) as url:
        yield url, runs


def runs_table(page):
    """The Runs table (a canvas grid whose rows are in its accessible table)."""
    heading = page.locator("thead th").get_by_text(locale("en")["col.name"], exact=True)
    return page.get_by_test_id("stDataFrame").filter(has=heading)


def test_a_run_started_from_the_command_line_shows_without_a_click(quiet_server, page):
    url, runs = quiet_server
    page.goto(url)
    wait_idle(page)
    rows = runs_table(page).locator("tbody tr")
    expect(rows).to_have_count(1)
    # as the trainer starts a run: its folder, config.json, then status.json (starting, its pid alive)
    write_run(runs, "from-cli", "", "", 1, 0.5, steps=3)
    status = json.loads((runs / "from-cli" / "status.json").read_text())
    write_json_atomic(runs / "from-cli" / "status.json", {**status, "state": "starting", "pid": os.getpid()})
    expect(rows).to_have_count(2, timeout=SHOWN_WITHIN_MS)
    expect(runs_table(page).locator("td").get_by_text("from-cli", exact=True)).to_have_count(1)
