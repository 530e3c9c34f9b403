"""The page names people type open their pages: /runs (Runs lives at /), /Runs, /Live?run=NAME, with
the address's query kept and no "Page not found". Runs written with the run-directory writer."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from browser_helpers import streamlit_server, wait_idle
from variants_helpers import write_run


@pytest.fixture(scope="module")
def address_server(tmp_path_factory):
    runs = tmp_path_factory.mktemp("address-runs")
    for i in range(2):
        write_run(runs, f"k{i}", "", "", i, 0.5, steps=3)
    with streamlit_server(runs) as url:
        yield url


@pytest.mark.parametrize("typed, heading, lands", [
    ("runs", "🗂️ Runs", r"/$"), ("Runs?run=k0", "🗂️ Runs", r"/\?run=k0$"), ("Live?run=k0", "📈 Live", r"/live\?run=k0$"),
    ("compare", "⚖️ Compare", r"/compare$"),
])
def test_a_page_name_typed_in_the_address_opens_that_page(address_server, page, typed, heading, lands):
    page.goto(f"{address_server}/{typed}")
    wait_idle(page)
    expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
    expect(page).to_have_url(re.compile(lands))
    page.wait_for_timeout(1000)  # Streamlit's "Page not found" dialog comes with the first script run
    expect(page.get_by_text("Page not found")).to_have_count(0)
    if "run=k0" in typed:  # the query went with it: the page opened on that run
        expect(page.get_by_role("combobox", name="Run", exact=True)).to_have_value(re.compile(r"^k0\b"))
