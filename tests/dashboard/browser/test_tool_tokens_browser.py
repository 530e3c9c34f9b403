"""A tool's output in the Groups page's token view, in a real browser: only the
model's tokens are coloured and carry a ratio; the tool's tokens are context (no colour from the scale,
dashed, a hover that says so, blank figures in the token table), and the scale the model's tokens are
drawn on leaves the tool's figures out. The tool run is written with the run-directory writer, no
trainer: its tool tokens carry figures far larger than the model's (ratio 5, KL 9), as a tokens table
may hold, so a view that coloured them would show it."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from browser_helpers import (assert_page_whole, click_until, locale, streamlit_server, to_chinese, wait_idle)
from grpo_lab.rundir.layout import RunPaths, write_json_atomic
from grpo_lab.rundir.writer import RunWriter
from grpo_lab.trainer.config import Config

NAME = "tool-run"
# one rollout: the model writes a call, the calculator appends its result, the model answers
TOKENS = [("calc ", "model"), ("12*3", "model"), ("=36", "tool"), ("\n", "tool"), ("36", "model")]
MODEL_RATIO, TOOL_RATIO, MODEL_KL, TOOL_KL = 1.1, 5.0, 0.2, 9.0
WORDS = {"en": {"heading": "Groups", "ratio": "ratio", "tool": "a tool's output", "legend": "Dashed grey tokens",
                "table": "Token table"},
         "zh": {"heading": "组查看", "ratio": "比率", "tool": "工具的输出", "legend": "灰色虚线框的 token",
                "table": "词元表"}}


def write_tool_run(root) -> None:
    """A finished calculator run of one step, one group of two rollouts, with its samples and tokens."""
    paths = RunPaths(root / NAME)
    paths.root.mkdir(parents=True)
    cfg = Config(name=NAME, runs_dir=str(root), task="big_arithmetic", tools="calculator",
                 max_new_tokens=20, max_steps=1, group_size=2)
    write_json_atomic(paths.config, cfg.run_record())
    write_json_atomic(paths.status, {"state": "finished", "step": 1, "total_steps": 1, "name": NAME,
                                     "started_at": 1.7e9, "updated_at": 1.7e9 + 10})
    turns = json.dumps([{"model": "calc 12*3", "tool": "calculator", "arguments": {"": "12*3"}, "result": "=36\n",
                         "seconds": 0.01, "error": None}, {"model": "36"}])
    writer = RunWriter(paths, flush_seconds=0)
    writer.log("samples", {
        "step": [1, 1], "group": [0, 0], "sample_idx": [0, 1], "prompt_id": ["p0", "p0"], "prompt": ["12*3="] * 2,
        "completion": ["calc 12*3=36\n36", "calc 12*3=36\n35"], "reward": [1.0, 0.0],
        "advantage": [1.0, -1.0], "length": [5, 5], "truncated": [False, False], "tool_calls": [1, 1],
        "tool_errors": [0, 0], "turns": [turns] * 2})
    rows = [(i, p, *TOKENS[p]) for i in range(2) for p in range(len(TOKENS))]
    tool = [source == "tool" for _, _, _, source in rows]
    writer.log("tokens", {
        "step": [1] * len(rows), "group": [0] * len(rows), "prompt_id": ["p0"] * len(rows),
        "sample_idx": [i for i, _, _, _ in rows], "position": [p for _, p, _, _ in rows],
        "token": ["35" if (i, p) == (1, 4) else token for i, p, token, _ in rows],
        "source": [source for _, _, _, source in rows],
        "logp_new": [-1.0] * len(rows), "logp_old": [-1.05] * len(rows), "logp_ref": [-1.0] * len(rows),
        "ratio": [TOOL_RATIO if x else MODEL_RATIO for x in tool], "kl": [TOOL_KL if x else MODEL_KL for x in tool],
        "clipped_low": [False] * len(rows), "clipped_high": [False] * len(rows), "clipped": [False] * len(rows),
        "advantage": [1.0 if i == 0 else -1.0 for i, _, _, _ in rows]})
    writer.close()


@pytest.fixture(scope="module")
def tool_server(tmp_path_factory):
    runs = tmp_path_factory.mktemp("tool-token-runs")
    write_tool_run(runs)
    with streamlit_server(runs) as url:
        yield url


def chips(page) -> list[dict]:
    """Each token chip of the view as drawn: its text, hover, background alpha and border style."""
    return page.evaluate("""() => [...document.querySelectorAll('.grpo-tokens > span')].map(e => {
        const s = getComputedStyle(e), bg = s.backgroundColor.match(/[\\d.]+/g).map(Number);
        return {text: e.innerText, title: e.title, alpha: bg.length > 3 ? bg[3] : 1, border: s.borderTopStyle};
    })""")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_token_view_colours_the_models_tokens_only(tool_server, page, lang):
    words = WORDS[lang]
    page.goto(f"{tool_server}/groups?run={NAME}")
    wait_idle(page)
    if lang == "zh":
        to_chinese(page, words["heading"])
    expect(page.locator(".grpo-tokens")).to_have_count(2, timeout=60_000)  # the group's two rollouts
    # the first chip is the model's: its hover in this language once the switch's last run has drawn
    expect(page.locator(".grpo-tokens > span").first).to_have_attribute("title", re.compile(re.escape(words["ratio"])),
                                                                         timeout=60_000)
    shown = chips(page)
    sources = [source for _, source in TOKENS] * 2
    assert len(shown) == len(sources), shown
    figure = re.compile(re.escape(words["ratio"]) + r"\s*\d")  # "ratio 1.1000": a ratio figure in the hover
    for chip, source in zip(shown, sources):
        if source == "tool":  # context: no colour from the scale, dashed, its hover says what it is, no ratio
            assert chip["alpha"] == 0 and chip["border"] == "dashed", chip
            assert words["tool"] in chip["title"] and not figure.search(chip["title"]), chip
            assert f"{TOOL_RATIO:.4f}" not in chip["title"] and f"{TOOL_KL:.4f}" not in chip["title"], chip
        else:  # the policy's token: coloured by its ratio (1.1: orange), its figures in the hover
            assert chip["alpha"] > 0 and chip["border"] != "dashed", chip
            assert f"{words['ratio']} {MODEL_RATIO:.4f}" in chip["title"], chip

    # KL mode: the model's largest KL (0.2) is the darkest purple; a scale that counted the tool's 9.0 dims it
    kl_mode = page.get_by_role("radio", name=locale(lang)["groups.mode.kl"], exact=True).last
    click_until(page, kl_mode, page.locator(".grpo-tokens > span[style*='128,0,160']").first)
    wait_idle(page)
    model_alphas = {c["alpha"] for c, s in zip(chips(page), sources) if s == "model"}
    assert model_alphas == {0.78}, model_alphas

    # the token table (a canvas; its cells are in the accessible table): the tool's rows have no figures
    page.locator("[data-testid=stExpander] summary").filter(has_text=words["table"]).click()
    grid = page.locator("[data-testid=stDataFrame]").last
    expect(grid.locator("td[role=gridcell]").first).to_be_attached()
    head = grid.locator("thead th").all_inner_texts()
    rows = [r.locator("td").all_inner_texts() for r in grid.locator("tbody tr").all()]
    ratio_at, source_at = head.index(locale(lang)["col.ratio"]), head.index(locale(lang)["col.source"])
    assert [r[source_at] for r in rows] == [s for _, s in TOKENS], rows
    for r in rows:
        assert bool(re.search(r"\d", r[ratio_at])) == (r[source_at] == "model"), (head, r)
    expect(page.get_by_text(words["legend"], exact=False)).to_be_visible()  # the caption says what dashed means
    assert_page_whole(page, chinese=lang == "zh")
