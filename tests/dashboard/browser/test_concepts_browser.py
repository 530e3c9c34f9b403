"""Each concept page in a real browser (Debian's Chromium through Playwright) against a live
`streamlit run grpo_lab/dashboard/app.py`: its chart renders and no Streamlit exception shows.

On failure a screenshot goes to test-artifacts/.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from browser_helpers import (ARTIFACTS, CHROMIUM, EXCEPTION, ROOT, assert_page_whole, click_until, locale,
                             streamlit_server)

pytestmark = pytest.mark.browser

CHART = ".vega-embed canvas, .vega-embed svg"
FIXTURE_CONFIG = (
    "rewards: {correctness: 1.0, length: 1.0}\n"
    "reward_params: {length: {max_len: 2, penalty_per_unit: 0.25}}\n"
)

# url path -> title, as the pages write it in English
PAGES = {
    "ppo-vs-grpo": "PPO vs GRPO",
    "group-advantage": "Group advantage",
    "ratio-clip": "Ratio and clip",
    "kl-divergence": "KL divergence",
    "grpo-objective": "The GRPO objective",
}


@pytest.fixture(scope="module")
def concepts_server(tmp_path_factory):
    """A streamlit server over a runs folder holding one real (two-step) GRPO run."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not installed: run make system-deps")
    runs = tmp_path_factory.mktemp("runs")
    cfg = runs.parent / "concepts-browser-fixture.yaml"
    cfg.write_text(FIXTURE_CONFIG)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GRPO_LAB_RUNS_DIR": str(runs)}
    done = subprocess.run([sys.executable, "-m", "grpo_lab.trainer", "--config", str(cfg), "--runs-dir", str(runs),
                           "--name", "browser-fx", "--max-steps", "2", "--prompts-per-step", "2", "--group-size", "4",
                           "--sft-steps", "0", "--flush-seconds", "0"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    with streamlit_server(runs) as url:
        yield url


@pytest.fixture
def tall_page(profile):
    """A page 1600 px tall (conftest's `page` is 1000); `_check` keeps its screenshot as
    test-artifacts/concepts-<name>.png when a check fails."""
    page = profile.new_page()
    page.set_viewport_size({"width": 1400, "height": 1600})
    yield page
    page.close()


def _shot(pg, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        pg.screenshot(path=str(ARTIFACTS / f"concepts-{name}.png"), full_page=True)
    except Exception:  # noqa: BLE001 - a failed screenshot must not hide the real failure
        pass


def _check(pg, name: str, action) -> None:
    """Run `action`, and keep a screenshot if it fails."""
    try:
        action()
    except pytest.skip.Exception:
        raise
    except BaseException:
        _shot(pg, name)
        raise


def _open(pg, url: str) -> None:
    pg.goto(url)
    pg.wait_for_selector('[data-testid="stMainBlockContainer"] h1', timeout=60_000)
    _idle(pg)


def _idle(pg) -> None:
    """Wait until the script run has finished (Streamlit marks its root element)."""
    pg.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=60_000)


def _click_until(pg, target, expected) -> None:
    """Click, and click again if the app did not react; then wait for the script run to end."""
    click_until(pg, target, expected)
    _idle(pg)


def _chart_and_no_exception(pg) -> None:
    pg.wait_for_selector(CHART, state="visible", timeout=60_000)
    _idle(pg)  # the rest of the script has run
    assert pg.locator(EXCEPTION).count() == 0, pg.locator(EXCEPTION).first.inner_text()
    assert pg.locator(CHART).first.bounding_box()["height"] > 50


@pytest.mark.parametrize("path", list(PAGES))
def test_concept_page_renders_its_chart(concepts_server, tall_page, path):
    def check():
        _open(tall_page, f"{concepts_server}/{path}")
        assert tall_page.locator("h1").first.inner_text().strip() == PAGES[path]
        _chart_and_no_exception(tall_page)

    _check(tall_page, path, check)


@pytest.mark.parametrize("path", ["group-advantage", "ratio-clip"])
def test_numbers_from_a_run_render(concepts_server, tall_page, path):
    def check():
        _open(tall_page, f"{concepts_server}/{path}")
        expected = "Logged by the trainer" if path == "ratio-clip" else "Recomputed A_i equal the logged ones"
        _click_until(tall_page, tall_page.get_by_text("a training run", exact=True),
                     tall_page.get_by_text(expected, exact=False).first)
        _chart_and_no_exception(tall_page)

    _check(tall_page, f"{path}-run", check)


def test_quiz_renders_and_answers(concepts_server, tall_page):
    def check():
        _open(tall_page, f"{concepts_server}/quiz")
        tall_page.wait_for_selector('[data-testid="stMainBlockContainer"] [data-testid="stRadio"]', timeout=30_000)
        assert tall_page.locator('[data-testid="stMainBlockContainer"] [data-testid="stRadio"]').count() == 5
        _click_until(tall_page, tall_page.get_by_text("It removes the value model", exact=False),
                     tall_page.get_by_text("Right.", exact=False).first)
        assert tall_page.locator(EXCEPTION).count() == 0

    _check(tall_page, "quiz", check)


# every concept page -> the key of its title
TITLE_KEYS = {"ppo-vs-grpo": "ppo.title", "group-advantage": "group.title", "ratio-clip": "clip.title",
              "kl-divergence": "kl.title", "grpo-objective": "obj.title", "grpo-variants": "var.title",
              "quiz": "quiz.title"}


@pytest.mark.parametrize("path", list(TITLE_KEYS))
def test_language_switch_shows_chinese(concepts_server, tall_page, path):
    """Each concept page switched to Chinese: its Chinese title, its chart, no English left over."""
    def check():
        _open(tall_page, f"{concepts_server}/{path}")
        tall_page.get_by_text("Language / 语言", exact=True).wait_for(timeout=30_000)
        _click_until(tall_page, tall_page.get_by_text("中文", exact=True),
                     tall_page.locator("h1").filter(has_text=locale("zh")[TITLE_KEYS[path]]))
        if path in PAGES:
            _chart_and_no_exception(tall_page)
        assert_page_whole(tall_page, chinese=True)

    _check(tall_page, f"language-{path}", check)
