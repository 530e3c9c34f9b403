"""What the pages say, read in a real browser: the tables of a prompt's history and of Groups' finders headed in
words with pass rates as percentages; Groups naming the group's mean apart from a rescore's whole-run mean,
its signal metric read in full; Compare's band of a 0-1 reward explained and kept inside 0-1; the launch form's
tool, environment, mismatch and sampling-loop fields; a queued run's plan on the Runs page, and a queued
variant's planned steps. One dashboard over runs written without a trainer: an imported verl dump with a
rescore, a sweep of two seeds far apart, a run holding the only slot and queue entries signed with its key."""

from __future__ import annotations

import re

import pytest
from browser_helpers import (assert_page_whole, click_until, grid_rows, locale, open_expander, streamlit_server,
                             to_chinese, wait_idle)
from playwright.sync_api import expect
from queue_helpers import plant, set_state
from run_sources import imported_verl_run
from variants_helpers import write_run

from grpo_lab.finished_runs import rescore
from grpo_lab.launching import launch_queue, launch_records
from grpo_lab.launching.keys import KEY_DIR_ENV

pytestmark = pytest.mark.browser
expect.set_options(timeout=60_000)

QUEUED = "q-a_1-s0"  # the only run of sweep q, queued behind the run holding the slot
PLANNED = 7  # its --max-steps
RAW = ("mean_reward", "std", "a_max", "prompt_id", "sample_idx", "pass_rate")  # the frames' column names


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("page-wording")
    runs = imported_verl_run(base)
    rescore.rescore(runs / "verl", rescore.parse_request("length", params={"length": {"max_len": 1}}, name="short"))
    # two seeds of one variant of a 0-1 reward (correctness), far apart: the t-interval of n = 2 spans about
    # +-2.5 at the last step, far outside what the reward can give
    for seed, level in ((0, 0.0), (1, 0.4)):
        write_run(runs, f"band-lr_1-s{seed}", "band", "lr=1", seed, level)
    with pytest.MonkeyPatch.context() as mp:
        # the server inherits these: the entry is checked with the key it was signed with here, and the one
        # slot is held by a running run (its pid this test process), so the entry waits
        mp.setenv(KEY_DIR_ENV, str(base / "keys"))
        mp.setenv(launch_queue.MAX_RUNS_ENV, "1")
        write_run(runs, "busy", "", "", 0, 0.5)
        set_state(runs, "busy", "running")
        (runs / launch_records.LAUNCH_DIR).mkdir()
        plant(runs, QUEUED, ["--name", QUEUED, "--sweep", "q", "--variant", "a=1", "--algo", "ppo",
                             "--max-steps", str(PLANNED)], sign=True)
        with streamlit_server(runs) as url:
            yield url, runs


def open_page(page, address: str, lang: str, heading: str) -> dict[str, str]:
    """The page at `address` in `lang` (`heading`: its h1 in Chinese); that language's texts."""
    page.goto(address)
    wait_idle(page)
    if lang == "zh":
        to_chinese(page, heading)
    return locale(lang)


def grid(page, heading: str):
    """The st.dataframe headed by a column `heading` (its cells are in the grid's accessible table)."""
    table = page.get_by_test_id("stDataFrame").filter(has=page.locator("thead th").get_by_text(heading, exact=True))
    expect(table.locator("td[role=gridcell]").first).to_be_attached()
    return table


def drawn_texts(page) -> list[str]:
    """Every text the page's canvases drew (a grid's cells are drawn, formatted, on a canvas; its accessible
    table holds the raw values)."""
    return page.evaluate("window.drawnTexts")


def record_canvas_text(page) -> None:
    page.add_init_script("window.drawnTexts = []; const fill = CanvasRenderingContext2D.prototype.fillText;"
                         "CanvasRenderingContext2D.prototype.fillText = function (text, ...rest) {"
                         " window.drawnTexts.push(String(text)); return fill.call(this, text, ...rest); };")


def finder(page, words: dict[str, str], key: str) -> None:
    """Pick Groups' finder `key` (groups.find.*) in its segmented control."""
    page.get_by_text(words[f"groups.find.{key}"], exact=True).click()
    wait_idle(page)


def test_a_prompts_history_heads_its_tables_in_words_and_shows_pass_rates_as_percentages(served, page):
    url, _ = served
    record_canvas_text(page)
    words = open_page(page, f"{url}/groups?run=verl", "en", "")
    click_until(page, page.get_by_text(words["prompt_history.open"]),
                page.locator("h1").filter(has_text=words["prompt_history.title"]))
    wait_idle(page)
    draws = grid(page, words["prompt_history.pass_rate"])
    head, rows = grid_rows(draws, cells=False)
    assert {words["col.mean_reward"], words["col.std"]} <= set(head), head
    assert not set(RAW) & set(head), head
    page.wait_for_timeout(1000)  # the grid's first paint
    drawn = drawn_texts(page)
    assert "25%" in drawn or "25.00%" in drawn, drawn  # the verl dump's draws: 1 of 4 completions passes
    assert "0.25" not in drawn, drawn
    expect(page.locator("[data-testid=stMetricValue]").filter(has_text=re.compile(r"^\d+%$")).first).to_be_visible()
    assert_page_whole(page)

    page.get_by_text(words["prompt_history.view.outcomes"], exact=True).click()
    wait_idle(page)
    page.evaluate("window.drawnTexts = []")
    page.get_by_role("tab", name=re.compile("^" + re.escape(words["prompt_history.kind.always"]))).click()  # the dump's third prompt
    outcomes = grid(page, words["col.prompt_id"])
    head, _ = grid_rows(outcomes, cells=False)
    assert words["prompt_history.col.pass_rate"] in head and not set(RAW) & set(head), head
    page.wait_for_timeout(1000)
    drawn = drawn_texts(page)
    assert "100%" in drawn or "100.00%" in drawn, drawn  # its pass rates, early and late: every completion passed
    assert_page_whole(page)


def test_groups_finders_head_their_tables_in_words(served, page):
    url, _ = served
    words = open_page(page, f"{url}/groups?run=verl", "en", "")
    finder(page, words, "positive")
    head, _ = grid_rows(grid(page, words["col.a_max"]), cells=False)
    assert {words["col.prompt_id"], words["col.mean_reward"], words["col.std"], words["col.a_max"]} <= set(head), head
    assert not set(RAW) & set(head), head

    finder(page, words, "search")
    page.get_by_label(words["groups.search"]).fill("1")
    page.get_by_label(words["groups.search"]).press("Enter")
    wait_idle(page)
    head, _ = grid_rows(grid(page, words["col.sample_idx"]), cells=False)
    assert {words["col.prompt_id"], words["col.sample_idx"]} <= set(head) and not set(RAW) & set(head), head
    assert_page_whole(page)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_groups_names_the_groups_mean_apart_from_the_rescores_whole_run_mean(served, page, lang):
    url, _ = served
    words = open_page(page, f"{url}/groups?run=verl", lang, locale("zh")["nav.groups"])
    finder(page, words, "no_signal")  # its first group is drawn: every reward equal
    metrics = page.locator("[data-testid=stMetric]")
    label = "[data-testid=stMetricLabel]"
    expect(metrics.filter(has=page.locator(label).get_by_text(words["groups.mean_reward"], exact=True))).to_have_count(1)
    expect(metrics.filter(has=page.locator(label).get_by_text(words["rescore.mean"], exact=True))).to_have_count(1)
    signal = metrics.filter(has=page.locator(label).get_by_text(words["groups.signal"], exact=True))
    value = signal.locator("[data-testid=stMetricValue]")
    expect(value).to_have_text(words["groups.no_signal"])
    assert value.evaluate("e => [...e.querySelectorAll('*')].concat([e]).every(x => x.scrollWidth <= x.clientWidth)")
    assert_page_whole(page, chinese=lang == "zh")


def test_compares_band_says_what_it_is_and_stays_inside_the_rewards_range(served, page):
    url, _ = served
    words = open_page(page, f"{url}/compare?sweep=band", "en", "")
    chart = page.locator("[data-testid=stVegaLiteChart]").filter(
        has=page.locator("[aria-label*='reward/mean']")).first
    subtitle = chart.locator("[aria-label^='Subtitle text']")
    expect(subtitle).to_have_attribute("aria-label", f"Subtitle text '{words['variants.band_help']}'")
    axis = chart.locator("[aria-label^='Y-axis']").get_attribute("aria-label")
    low, high = (float(v) for v in re.search(r"values from (-?[\d.]+) to (-?[\d.]+)", axis).groups())
    assert 0 <= low and high <= 1, axis
    # the band (the area mark) drawn above the axis's 0, below its 1: its path's y in pixels
    plot = chart.locator("g.mark-group.role-frame.root path.background").first.get_attribute("d")
    height = float(re.search(r"v(-?[\d.]+)", plot).group(1))
    band = chart.locator("g.mark-area path").evaluate_all("ps => ps.map(p => p.getAttribute('d'))")
    assert band, "no band drawn"
    ys = [float(y) for d in band for y in re.findall(r"[ML,]\s*-?[\d.]+,(-?[\d.]+)", d)]
    assert ys and min(ys) >= -0.5 and max(ys) <= height + 0.5, (min(ys), max(ys), height)
    assert_page_whole(page)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_launch_forms_more_options_has_tools_budget_mismatch_sampling_loop_and_trackers(served, page, lang):
    url, _ = served
    words = open_page(page, url, lang, locale("zh")["nav.runs"])
    open_expander(page, words["runs.start_expander"])
    more = open_expander(page, words["launch.more"])
    for name in ("tools", "environment", "max_tool_calls", "mismatch_correction", "decode", "report_to"):
        expect(more.get_by_label(words[f"option.{name}.label"], exact=True)).to_be_visible()
    assert_page_whole(page, chinese=lang == "zh")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_queued_run_shows_its_plan_and_its_variant_its_planned_steps(served, page, lang):
    url, runs = served
    words = open_page(page, url, lang, locale("zh")["nav.runs"])
    table = grid(page, words["col.name"])
    head, rows = grid_rows(table, words["col.name"], cells=False)
    row = next((r for r in rows if r[head.index(words["col.name"])] == QUEUED), None)
    assert row is not None, rows
    shown = [row[head.index(words[f"col.{c}"])] for c in ("algo", "model", "task", "step")]
    assert shown == ["ppo", "tiny", "arithmetic", words["runs.step_queued"].format(total=PLANNED)], (head, row)
    assert launch_records.record_names(runs) == [QUEUED]  # still queued: nothing started it

    sweep = page.get_by_text(re.compile(re.escape(words["sweeps.row"].split("{sweep}")[0]) + "q"), exact=False).first
    sweep.click()
    expander = page.get_by_test_id("stExpander").filter(has_text=re.compile(
        re.escape(words["sweeps.row"].split("{sweep}")[0]) + "q\\b"))
    variants = expander.get_by_test_id("stDataFrame")
    head, rows = grid_rows(variants, words["sweeps.col_steps"])
    assert [r[head.index(words["sweeps.col_steps"])] for r in rows] == [f"0 / {PLANNED}"], (head, rows)
    assert_page_whole(page, chinese=lang == "zh")
