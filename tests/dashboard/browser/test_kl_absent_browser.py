"""A KL a run did not measure is absent on Compare, in a real browser: a beta = 0 run
has no reference model, so beside beta = 0.04 the verdict says it did not measure final KL (it used to
read its logged 0 as a measurement: "beta=0.04 is higher than beta=0 in final KL by 0.339"), its KL is
"—" in the tables, and the KL chart draws no beta = 0 line. Runs written with the run-directory writer,
no trainer: two beta = 0 seeds logged KL 0 (as trainers before the fix did), a third none (as now)."""

from __future__ import annotations

import numpy as np
import pytest
from playwright.sync_api import expect

from browser_helpers import (assert_page_whole, grid_rows, literal, locale, streamlit_server, to_chinese, type_to_choose,
                             wait_idle)
from grpo_lab.rundir.layout import RunPaths, write_json_atomic
from grpo_lab.rundir.writer import RunWriter
from grpo_lab.trainer.config import Config

SWEEP, STEPS = "kl", 6
ZERO, BETA = "beta=0", "beta=0.04"
WORDS = {"en": {"heading": "Compare", "metric": "metric", "not_measured": "did not measure final KL",
                "claims": "higher"},
         "zh": {"heading": "运行对比", "metric": "指标", "not_measured": "没有测量 最终 KL", "claims": "高"}}


def write_run(root, variant: str, seed: int, beta: float, kl_slope: float | None) -> str:
    """A finished run of the sweep; kl/mean = kl_slope * step, not logged at all when kl_slope is None."""
    name = f"{SWEEP}-{variant.replace('=', '_')}-s{seed}"
    paths = RunPaths(root / name)
    paths.root.mkdir(parents=True)
    cfg = Config(name=name, runs_dir=str(root), seed=seed, sweep=SWEEP, variant=variant, max_steps=STEPS, beta=beta)
    write_json_atomic(paths.config, cfg.run_record())
    write_json_atomic(paths.status, {"state": "finished", "step": STEPS, "total_steps": STEPS, "name": name,
                                     "started_at": 1.7e9 + seed, "updated_at": 1.7e9 + 100})
    x = np.arange(1, STEPS + 1)
    scalars = {"step": x.tolist(), "time": (1.7e9 + x).tolist(), "wall_s": (2.0 * x).tolist(),
               "reward/mean": (0.1 * x + 0.01 * seed).tolist(), "completion/length_mean": [3.0] * STEPS,
               "time/step_s": [2.0] * STEPS}
    if kl_slope is not None:
        scalars["kl/mean"] = (kl_slope * x).tolist()
    writer = RunWriter(paths, level="scalars", flush_seconds=0)
    writer.log("scalars", scalars)
    writer.close()
    return name


@pytest.fixture(scope="module")
def kl_server(tmp_path_factory):
    runs = tmp_path_factory.mktemp("kl-absent-runs")
    names = [write_run(runs, ZERO, 0, 0.0, 0.0), write_run(runs, ZERO, 1, 0.0, 0.0),  # logged 0, as before the fix
             write_run(runs, ZERO, 2, 0.0, None),  # logged nothing, as a beta = 0 run does now
             write_run(runs, BETA, 0, 0.04, 0.05), write_run(runs, BETA, 1, 0.04, 0.051)]
    with streamlit_server(runs) as url:
        yield url, names


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_sweep_does_not_compare_a_kl_that_beta_0_did_not_measure(kl_server, page, lang):
    url, _ = kl_server
    words, text = WORDS[lang], locale(lang)
    page.goto(f"{url}/compare?sweep={SWEEP}")
    wait_idle(page)
    if lang == "zh":
        to_chinese(page, words["heading"])
    final_kl = text["variants.metric_final_KL"]

    # the verdict on final KL: beta=0 did not measure it, so no difference is claimed
    picker = page.get_by_test_id("stSelectbox").get_by_role("combobox", name=words["metric"], exact=True)
    type_to_choose(page, picker, final_kl)  # typed: the list opens below the page's last line, past the viewport
    wait_idle(page)
    verdict = page.locator("[data-testid=stMarkdownContainer]").filter(has_text=final_kl).filter(has_text=ZERO).last
    expect(verdict).to_contain_text(words["not_measured"])
    expect(verdict).to_contain_text(ZERO)
    assert words["claims"] not in verdict.inner_text(), verdict.inner_text()

    # the per-metric table: beta=0's final KL is absent, beta=0.04's a figure
    columns = [text[k] for k in ("variants.variant", "variants.metric", "variants.mean_ci")]
    head, rows = grid_rows(page.locator("[data-testid=stDataFrame]").first, *columns)
    variant_at, metric_at, mean_at = (head.index(c) for c in columns)
    kl_cells = {r[variant_at]: r[mean_at] for r in rows if r[metric_at] == final_kl}
    assert kl_cells[ZERO] == "—" and kl_cells[BETA].startswith("0.3"), kl_cells  # 0.05 x 6 and 0.051 x 6

    # the KL chart (SVG): one line, beta=0.04's; the reward chart has both
    legends = {}
    for metric in ("kl/mean", "reward/mean"):
        chart = page.locator("[data-testid=stVegaLiteChart]").filter(has_text=metric)
        legends[metric] = sorted(chart.locator(".role-legend-label text").all_text_contents())
    assert legends == {"kl/mean": [BETA], "reward/mean": [ZERO, BETA]}, legends
    assert_page_whole(page, chinese=lang == "zh")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_compare_says_a_beta_0_runs_final_kl_is_not_measured_and_single_seeds_cannot_be_compared(kl_server, page, lang):
    url, names = kl_server
    zero, other = names[0], names[3]  # the beta=0 run that logged KL 0, a beta=0.04 run
    page.goto(f"{url}/compare?runs={zero},{other}")
    wait_idle(page)
    if lang == "zh":
        to_chinese(page, WORDS[lang]["heading"])
    expect(page.get_by_text(locale(lang)["compare.summary"].strip("*#: "), exact=False).first).to_be_visible()
    run, final_kl = locale(lang)["col.run"], locale(lang)["col.final_kl"]
    head, rows = grid_rows(page.locator("[data-testid=stDataFrame]").first, run, final_kl)
    run_at, kl_at = head.index(run), head.index(final_kl)
    kl = {r[run_at]: r[kl_at] for r in rows}
    assert float(kl[other]) == pytest.approx(0.05 * STEPS), kl  # the cell's value (shown as 0.3000)
    assert kl[zero] == locale(lang)["compare.not_measured"], kl  # said, not a blank nor 0
    # two configs of one seed each: said before any curve, each named by the option it differs in
    caution = page.get_by_test_id("stAlert").filter(has_text=literal("compare.too_few_seeds", lang)[:15])
    expect(caution).to_contain_text("beta=0.0")
    expect(caution).to_contain_text("beta=0.04")
    expect(page.get_by_role("link", name=locale(lang)["compare.add_seeds"][:20])).to_be_visible()
    assert_page_whole(page, chinese=lang == "zh")
