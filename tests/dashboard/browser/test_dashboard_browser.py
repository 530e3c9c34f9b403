"""The dashboard in a real browser: launch the demo, watch it learn, open a group, compare, stop."""

from __future__ import annotations

import re

import pytest
from browser_helpers import (assert_page_whole, choose, english_only_phrases, locale, main_text, open_expander,
                             press, stop_trainers, to_chinese, wait_idle)
from playwright.sync_api import expect
from trainer_helpers import wait_until

from grpo_lab.rundir.reader import read_run

pytestmark = pytest.mark.browser
CHARTS = "[data-testid=stVegaLiteChart] canvas, [data-testid=stVegaLiteChart] svg"
RUN_PICKED = ("(name => (document.querySelector('input[aria-label=Run]')?.value || '')"
              ".split(' ')[0] === name)")  # the run selectbox


expect.set_options(timeout=60_000)


def progress_step(page) -> int:
    text = page.get_by_text(re.compile(r"^step \d+ / \d+$")).first.inner_text()
    return int(text.split()[1])


def step_past(page, n: int) -> int | None:
    """Live's step once it is past `n`."""
    step = progress_step(page)
    return step if step > n else None


def test_launch_the_demo_from_the_form_and_watch_live_update(server, page, traffic):
    url, runs = server
    page.goto(url)
    wait_idle(page)
    open_expander(page, "🚀 Start a training run")
    page.get_by_label("Steps", exact=True).fill("40")
    page.get_by_label("Run name", exact=True).fill("e2e-demo")
    press(traffic, page.get_by_role("button", name="Start training"))
    # The new run becomes the selected one on Runs; once its directory exists, open it in Live.
    page.wait_for_function(f"{RUN_PICKED}('e2e-demo')")
    live = page.locator("[data-testid=stPageLink] a[href*='live?run=e2e-demo']")
    live.wait_for(timeout=120_000)  # shown once the run directory exists
    live.click()
    page.wait_for_function("location.pathname.endsWith('/live')")  # st.switch_page: same document
    page.wait_for_function(f"{RUN_PICKED}('e2e-demo')")
    page.get_by_text(re.compile(r"^step \d+ / 40$")).first.wait_for(timeout=120_000)
    first = wait_until(lambda: step_past(page, 0), 120, "e2e-demo's first step", every=0.5)
    page.wait_for_function(f"document.querySelectorAll('{CHARTS}').length >= 3")  # the overview
    # no reload: the fragment refreshes itself
    wait_until(lambda: step_past(page, first), 120, f"Live to show a step after {first}", every=0.5)
    stop_trainers(runs, "e2e-demo")  # seen learning: its other steps would only slow the tests after it


def test_live_draws_the_overview_first_and_a_section_when_it_is_opened(server, page):
    url, _ = server
    page.goto(f"{url}/live?run=alpha")
    wait_idle(page)
    drawn = ("n => { const cs = [...document.querySelectorAll('[data-testid=stVegaLiteChart]')]; "
             "return cs.length === n && cs.every(c => c.querySelector('canvas, svg')); }")  # n charts, all drawn
    page.wait_for_function(drawn, arg=3)  # Reward, KL, clip fraction; the rest waits in closed expanders
    page.locator("[data-testid=stExpander] summary").filter(has_text="Speed").click()
    page.wait_for_function(drawn, arg=5)  # + throughput, where the step goes: only the fragment reran
    expect(page.locator("[data-testid=stExpander]").filter(has_text="Speed").locator(
        "[data-testid=stVegaLiteChart]")).to_have_count(2)
    page.locator("[data-testid=stExpander] summary").filter(has_text="Ratio histogram").click()
    page.wait_for_function(drawn, arg=7)
    page.locator("[data-testid=stExpander] summary").filter(has_text="Speed").click()
    page.wait_for_function(drawn, arg=5)
    assert page.locator("[data-testid=stException]").count() == 0


def test_a_group_shows_positive_and_negative_advantages_in_colour(server, page):
    url, _ = server
    page.goto(f"{url}/groups?run=alpha")
    wait_idle(page)
    page.get_by_text("Most positive", exact=True).click()
    wait_idle(page)
    expect(page.get_by_text(re.compile(r"\d+ groups; click a row"))).to_be_visible()  # the finder's table
    expect(page.get_by_text("Recomputed advantages equal the logged ones")).to_be_visible()

    def rgb(kind):
        row = page.locator(f"tr[data-adv={kind}]").first
        expect(row).to_be_visible()
        return [int(v) for v in re.findall(r"\d+", row.evaluate("e => getComputedStyle(e).backgroundColor"))[:3]]

    green, red = rgb("pos"), rgb("neg")
    assert green[1] > green[0] and green[1] > green[2]
    assert red[0] > red[1] and red[0] > red[2]


def test_compare_two_runs(server, page):
    url, _ = server
    page.goto(f"{url}/compare?runs=alpha,beta")
    wait_idle(page)
    page.wait_for_function(f"document.querySelectorAll('{CHARTS}').length >= 4")
    side = page.locator("[data-testid=stMarkdownContainer]").filter(has_text=re.compile(r"step \d+ · mean"))
    expect(side).to_have_count(2)  # the same prompt's group, one per run
    expect(page.locator("table.grpo-responses")).to_have_count(2)
    names = " ".join(side.all_inner_texts())
    assert "alpha" in names and "beta" in names


def test_stop_a_running_run(server, page, traffic):
    from grpo_lab.launching import launcher

    url, runs = server
    name, _ = launcher.launch({"name": "e2e-stop", "max_steps": 5000, "group_size": 2, "prompts_per_step": 2,
                               "sft_steps": 1, "passes": 1}, runs)
    wait_until(lambda: read_run(runs, name).state == "running", 120, f"{name} running", every=0.3)
    page.goto(url)
    wait_idle(page)
    choose(page.get_by_role("combobox", name="Run"), page.get_by_role("option", name=name, exact=True))
    page.wait_for_function(f"{RUN_PICKED}('{name}')")
    wait_idle(page)
    press(traffic, page.get_by_role("button", name=re.compile("Stop")))
    wait_until(lambda: read_run(runs, name).state == "stopped", 120, f"{name} stopped", every=0.3)
    page.goto(f"{url}/live?run={name}")
    page.get_by_text(re.compile("stopped")).first.wait_for()


def test_the_training_pages_follow_the_language_switch(server, page):
    url, _ = server
    page.goto(f"{url}/live?run=alpha")
    wait_idle(page)
    to_chinese(page, "实时监控")
    page.wait_for_function(f"document.querySelectorAll('{CHARTS}').length >= 3")
    expect(page.get_by_text(re.compile(r"^第 \d+ / \d+ 步$")).first).to_be_visible()
    assert_page_whole(page, chinese=True)
    # the run picker shows the run's state in Chinese too (a kept selectbox would keep "finished")
    picked = page.locator("[data-testid=stSelectbox] input").evaluate_all("es => es.map(e => e.value)")
    shown = [v for v in picked if v.startswith("alpha")]
    states = [v for k, v in locale("zh").items() if k.startswith("state.")]
    assert shown and any(s in shown[0] for s in states), picked
    # the choice lasts the session: the navigation is in Chinese, and so is the next page
    page.locator("[data-testid=stSidebarNav] a").filter(has_text="组查看").click()
    expect(page.locator("h1").filter(has_text="组查看")).to_be_visible()
    wait_idle(page)
    page.get_by_text("优势最高", exact=True).click()
    wait_idle(page)
    expect(page.get_by_text("重算的优势与记录的一致", exact=False)).to_be_visible()
    assert_page_whole(page, chinese=True)


def preset_showing(page, code: str):
    """The selectboxes showing the built-in demo preset's name in language `code`."""
    shown = locale(code)["launch.preset_demo"]
    return page.locator("[data-testid=stSelectbox] input").filter(has=page.locator(f"xpath=self::*[@value='{shown}']"))


def test_the_launch_forms_preset_follows_the_language_switch(server, page):
    """A selectbox kept across the switch would keep its English label in the browser (Streamlit
    redraws the options, not the shown value): the preset picker is a widget per language."""
    url, _ = server
    page.goto(url)
    wait_idle(page)
    open_expander(page, locale("en")["runs.start_expander"])
    wait_idle(page)
    expect(preset_showing(page, "en")).to_have_count(1)  # retried: the form may still be drawing
    to_chinese(page, "运行列表")
    expect(preset_showing(page, "zh")).to_have_count(1)
    expect(preset_showing(page, "en")).to_have_count(0)  # the English draw's picker goes when that run ends


# page -> (address, its title in Chinese, labels it shows in Chinese, as in locales/zh.yaml)
IN_CHINESE = {
    "runs": ("", "运行列表", ["按名称筛选", "状态", "所选运行", "🚀 启动训练", "train.log（最后几行）"]),
    "compare": ("compare?runs=alpha,beta", "运行对比",
                ["指标", "摘要", "配置：取值不同的选项", "同一提示词的回答，并排对比"]),
}


@pytest.mark.parametrize("name", list(IN_CHINESE))
def test_runs_and_compare_in_chinese(server, page, name):
    """The page in English, then in Chinese: its labels are the Chinese ones, nothing fell back to
    English, and no text key was missing (a missing key raises, and the page would say it failed)."""
    url, _ = server
    address, title, labels = IN_CHINESE[name]
    page.goto(f"{url}/{address}")
    wait_idle(page)
    assert_page_whole(page)
    assert any(p in main_text(page) for p in english_only_phrases())  # the check below can see English
    to_chinese(page, title)
    if name == "compare":
        page.wait_for_function(f"document.querySelectorAll('{CHARTS}').length >= 4")
        side = page.locator("[data-testid=stMarkdownContainer]").filter(has_text=re.compile(r"第 \d+ 步 · 均值"))
        expect(side).to_have_count(2)  # the same prompt's completions, one column per run
    for label in labels:
        expect(page.get_by_text(label, exact=True).first).to_be_visible()
    assert_page_whole(page, chinese=True)
