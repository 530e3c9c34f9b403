"""`/compare?sweep=NAME` in a real browser: 3 variants x 5 seeds of 200 steps (written with the
run-directory writer, no trainer), each variant's band and mean drawn, the CI table and the verdict,
in English and in Chinese. Prints how long the page took to draw its charts (the target:
2 s; not asserted here, as this machine's cores are shared)."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from browser_helpers import assert_page_whole, streamlit_server, to_chinese, wait_idle
from variants_helpers import write_sweep

CHARTS = "[data-testid=stVegaLiteChart]"


@pytest.fixture(scope="module")
def sweep_server(tmp_path_factory):
    runs = tmp_path_factory.mktemp("sweep-browser-runs")
    write_sweep(runs, "s", {"beta=0": 0.2, "beta=0.04": 0.8, "beta=0.1": 0.5}, seeds=5, steps=200)
    with streamlit_server(runs) as url:
        yield url


def test_a_sweep_opens_as_variants_with_bands_in_both_languages(sweep_server, page):
    started = time.monotonic()
    page.goto(f"{sweep_server}/compare?sweep=s")
    page.wait_for_function(f"document.querySelectorAll('{CHARTS}').length >= 2")
    wait_idle(page)
    print(f"\ncompare?sweep=s, 15 runs x 200 steps: charts drawn {time.monotonic() - started:.1f} s after goto")
    assert_page_whole(page)
    heights = [page.locator(CHARTS).nth(i).bounding_box()["height"] for i in range(2)]
    assert min(heights) > 150, heights  # drawn: a spec Vega-Lite refuses leaves an empty box
    expect(page.get_by_text("Sweep s: variants across seeds")).to_be_visible()
    expect(page.get_by_text("Sweep s: 15 of 15 runs finished")).to_be_visible()  # sweeps_view.summary_line
    expect(page.get_by_text(re.compile(r"beta=0\.04 is higher than beta=0 in final reward by 0\.6"))).to_be_visible()

    to_chinese(page, "运行对比")
    page.wait_for_function(f"document.querySelectorAll('{CHARTS}').length >= 2")
    expect(page.get_by_text("扫描 s：各变体跨种子对比")).to_be_visible()
    expect(page.get_by_text(re.compile(r"beta=0\.04 的最终奖励比 beta=0 高 0\.6"))).to_be_visible()
    assert_page_whole(page, chinese=True)
