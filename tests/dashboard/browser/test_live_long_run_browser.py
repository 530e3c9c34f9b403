"""Live's first paint of a long run in a real browser: the overview's charts draw their marks on a canvas,
whatever the run's length (the page's SVG keeps only titles, axes and legends: a few dozen elements, where
one element per point and a Voronoi cell per point came to thousands), the curves say they are downsampled,
and the tooltip over a curve shows every series of the chart at the step under the pointer. A run of
scalars alone, written here: no trainer needed."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from browser_helpers import assert_page_whole, locale, streamlit_server, wait_idle
from playwright.sync_api import expect

from grpo_lab.dashboard.reading import downsample
from grpo_lab.rundir.layout import SCHEMA_VERSION, RunPaths, write_json_atomic
from grpo_lab.rundir.writer import RunWriter

pytestmark = pytest.mark.browser
expect.set_options(timeout=60_000)
NAME, STEPS = "long", 3_000
OVERVIEW = 3  # Reward, KL, clip fraction: the charts Live draws before any section is opened
SVG_ELEMENTS = 300  # per chart: its text (title, subtitle, axes, legend); the old SVG marks ran to thousands


def write_long_run(runs, name: str = NAME, steps: int = STEPS) -> None:
    """A finished run of `steps` steps with the overview's metrics, noisy, and one spike in KL."""
    paths = RunPaths(runs / name)
    paths.root.mkdir(parents=True)
    t0 = time.time() - steps
    write_json_atomic(paths.config, {"name": name, "algo": "grpo", "model": "tiny", "task": "arithmetic",
                                     "max_steps": steps, "group_size": 4, "prompts_per_step": 4, "epsilon": 0.2,
                                     "beta": 0.04, "rewards": {"correctness": 1.0}})
    rng = np.random.default_rng(0)
    step = np.arange(1, steps + 1)
    kl = rng.random(steps) * 0.01
    kl[steps // 2] = 0.5
    cols = {"step": step, "time": t0 + step, "wall_s": step.astype(float), "reward/mean": rng.random(steps),
            "rewards/correctness/mean": rng.random(steps), "kl/mean": kl, "clip/low": rng.random(steps) * 0.1,
            "clip/high": rng.random(steps) * 0.1, "clip/total": rng.random(steps) * 0.2}
    writer = RunWriter(paths, "full", flush_seconds=0)
    writer.log("scalars", cols)
    writer.close()
    write_json_atomic(paths.status, {"schema_version": SCHEMA_VERSION, "state": "finished", "pid": None,
                                     "step": steps, "total_steps": steps, "started_at": t0, "updated_at": time.time(),
                                     "error": None, "name": name, "algo": "grpo", "model": "tiny",
                                     "task": "arithmetic"})


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    runs = tmp_path_factory.mktemp("long-runs")
    write_long_run(runs)
    with streamlit_server(runs) as url:
        yield url


def test_the_overview_of_a_long_run_draws_on_canvases_with_a_tooltip_of_every_series(served, page):
    page.goto(f"{served}/live?run={NAME}")
    wait_idle(page)
    charts = page.locator("[data-testid=stVegaLiteChart]")
    expect(charts).to_have_count(OVERVIEW)
    page.wait_for_function("n => { const cs = [...document.querySelectorAll('[data-testid=stVegaLiteChart]')]; "
                           "return cs.length === n && cs.every(c => c.querySelector('canvas')); }", arg=OVERVIEW)
    svg_elements = page.evaluate("[...document.querySelectorAll('[data-testid=stVegaLiteChart]')]"
                                 ".map(c => c.querySelectorAll('svg *').length)")
    assert all(n < SVG_ELEMENTS for n in svg_elements), svg_elements
    words = locale("en")
    stride = downsample.bucket_size(STEPS)
    expect(page.get_by_text(words["live.downsampled"].format(stride=stride, points=downsample.MAX_POINTS))).to_be_visible()

    kl = charts.filter(has_text=words["panel.kl.title"]).first
    box = kl.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    tooltip = page.locator("#vg-tooltip-element")
    expect(tooltip).to_contain_text("kl/mean")
    expect(tooltip).to_contain_text(re.compile(rf"\({re.escape(words['chart.raw'])} [0-9.e-]+\)"))
    assert_page_whole(page)
