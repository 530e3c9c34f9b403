"""A live `streamlit run grpo_lab/dashboard/app.py` on a free port, and Debian's Chromium driven by Playwright.

The server reads a temporary runs folder that already holds two small runs made by the trainer.
A failing test leaves a screenshot in test-artifacts/<test name>.png.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))  # trainer_helpers, also when only tests/browser is collected
from trainer_helpers import start_trainer, wait_trainers  # noqa: E402

ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
            wait_until_healthy(url, runs)
            yield url, runs
    finally:
        stop_trainers(runs)


@contextlib.contextmanager
def streamlit_server(runs: Path):
    """`streamlit run grpo_lab/dashboard/app.py` on a free port over the runs folder `runs`; yields its url."""
    port = free_port()
    log = open(runs.parent / "streamlit.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "grpo_lab" / "dashboard" / "app.py"),
                             "--server.port", str(port), "--server.headless", "true", "--server.address", "127.0.0.1",
                             "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
                            cwd=ROOT, env={**os.environ, "GRPO_LAB_RUNS_DIR": str(runs), "PYTHONPATH": str(ROOT)},
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def wait_until_healthy(url: str, runs: Path, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while True:
        try:
            urllib.request.urlopen(f"{url}/_stcore/health", timeout=2)
            return
        except OSError:
            if time.time() > deadline:
                raise RuntimeError("streamlit did not start: " + (runs.parent / "streamlit.log").read_text()[-2000:])
            time.sleep(0.3)


def stop_trainers(runs: Path) -> None:
    """End every trainer the tests launched through the dashboard (their pids are on record)."""
    from grpo_lab.dashboard import launcher
    from grpo_lab.rundir.layout import read_json

    for record in (runs / launcher.LAUNCH_DIR).glob("*.json"):
        data = read_json(record) or {}
        if launcher.is_trainer_of(data.get("pid"), record.stem):
            os.kill(data["pid"], signal.SIGKILL)


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser, request):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(60_000)
    yield pg
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()
