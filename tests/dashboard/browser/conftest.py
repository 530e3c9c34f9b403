"""A live `streamlit run grpo_lab/dashboard/app.py` on a free port, and Debian's Chromium driven by Playwright.

`server` reads a temporary runs folder that already holds two small runs made by the trainer.
A failing test that used `page` leaves a screenshot in test-artifacts/<test name>.png.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # browser_helpers, whatever the import mode
from browser_helpers import (ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, Traffic, stop_trainers,  # noqa: E402
                             streamlit_server)
from trainer_helpers import start_trainer, wait_trainers  # noqa: E402  (browser_helpers put tests/ on the path)
from playwright.sync_api import expect  # noqa: E402

# every assertion waits as long as a page may take on a loaded 2-core machine (Playwright's default is 5 s)
expect.set_options(timeout=60_000)

SMALL = ["--prompts-per-step", "4", "--sft-steps", "10", "--group-size", "4"]


def pytest_collection_modifyitems(items):
    for item in items:
        if "browser" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """(base url, runs folder) of a dashboard serving two finished runs, alpha and beta."""
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is not installed: run make system-deps")
    runs = tmp_path_factory.mktemp("browser-runs")
    made = [start_trainer(runs, "alpha", *SMALL, "--max-steps", "12"),
            start_trainer(runs, "beta", *SMALL, "--max-steps", "8", "--beta", "0")]
    try:
        with streamlit_server(runs) as url:
            wait_trainers(made, timeout=240)
            yield url, runs
    finally:
        stop_trainers(runs)


@pytest.fixture(scope="session")
def playwright_driver():
    """The process's one Playwright: a second sync_playwright() where one is open fails ("Sync API inside
    the asyncio loop"), and an xdist worker may reach a module with its own browser after `browser`."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="session")
def browser(playwright_driver):
    """A Chromium for tests that make their own contexts (two visitors at once); most use `page`."""
    b = playwright_driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    yield b
    b.close()


@pytest.fixture(scope="session")
def profile(playwright_driver, tmp_path_factory):
    """The worker's Chromium with a profile on disk, for `page`. A page in a fresh context compiles
    Streamlit's scripts anew (about 1.7 s of CPU to the first page drawn); in this profile they come from
    its code cache (about 1.0 s). Each test still gets a page of its own, so a Streamlit session of its own."""
    context = playwright_driver.chromium.launch_persistent_context(
        str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
        viewport={"width": 1400, "height": 1000})
    yield context
    context.close()


@pytest.fixture
def page(profile, request):
    profile.clear_cookies()  # nothing of another test's visit
    pg = profile.new_page()
    pg.set_default_timeout(60_000)
    yield pg
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    pg.close()


@pytest.fixture
def traffic(page):
    """What `page` and its server say over the websocket, for `press`; watched from before the test's first
    goto (only where a test asks: every frame is parsed)."""
    return Traffic(page)
