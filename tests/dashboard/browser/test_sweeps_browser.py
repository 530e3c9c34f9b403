"""The Runs page in a real browser: a sweep is one collapsed row with its progress, and its link
opens `/compare?sweep=NAME`; in English and in Chinese. Runs written with the run-directory writer
(tests/variants_helpers.py), no trainer."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from browser_helpers import assert_page_whole, streamlit_server, to_chinese, wait_idle
from variants_helpers import write_sweep


@pytest.fixture(scope="module")
def sweep_runs_server(tmp_path_factory):
    runs = tmp_path_factory.mktemp("sweep-runs-page")
    write_sweep(runs, "s", {"beta=0": 0.2, "beta=0.04": 0.8}, seeds=3, steps=12)
    with streamlit_server(runs) as url:
        yield url


def test_a_sweep_is_one_row_on_runs_and_links_to_its_comparison(sweep_runs_server, page):
    page.goto(sweep_runs_server)  # Runs is the default page: its address is /
    row = page.get_by_text("Sweep s: 6 of 6 runs finished")
    expect(row).to_be_visible()
    wait_idle(page)
    assert_page_whole(page)
    row.click()
    link = page.get_by_text("Compare its variants (mean and 95% band across seeds)")
    expect(link).to_be_visible()
    link.click()
    expect(page.get_by_text("Sweep s: variants across seeds")).to_be_visible()
    assert "sweep=s" in page.url

    page.goto(sweep_runs_server)  # Runs is the default page: its address is /
    expect(row).to_be_visible()
    to_chinese(page, "运行列表")
    expect(page.get_by_text("扫描 s：共 6 个运行，6 个已完成")).to_be_visible()
    assert_page_whole(page, chinese=True)
