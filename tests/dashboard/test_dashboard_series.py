"""The numbers behind the charts: EMA smoothing, min/max downsampling, histogram cells."""

import numpy as np
import pandas as pd
import pytest

from grpo_lab.dashboard.reading import downsample
from grpo_lab.dashboard.views import charts, metrics, series
from grpo_lab.rundir.metrics import PHASES


def test_ema_is_debiased_and_zero_weight_is_raw():
    x = np.array([1.0, 2.0, 3.0])
    assert series.ema(x, 0.0).tolist() == [1.0, 2.0, 3.0]
    # weight 0.5: s1 = 1; s2 = (0.5*1 + 2) / 1.5; no pull towards 0 at the start.
    assert series.ema(x, 0.5)[:2] == pytest.approx([1.0, (0.5 + 2) / 1.5])


def test_ema_keeps_nan_gaps_without_poisoning_later_points():
    out = series.ema(np.array([1.0, np.nan, 1.0]), 0.9)
    assert np.isnan(out[1]) and out[0] == 1.0 and out[2] == pytest.approx(1.0)


def test_the_series_module_examples_hold():
    import doctest

    assert doctest.testmod(series).failed == 0


def test_downsampling_caps_points_and_keeps_every_spike():
    rng = np.random.default_rng(0)
    values = rng.normal(size=100_000)
    values[12_345], values[77_777] = 50.0, -50.0
    idx = downsample.minmax_indices(values, 2000)
    assert len(idx) <= 2000 and idx[0] == 0 and idx[-1] == len(values) - 1
    assert 12_345 in idx and 77_777 in idx and np.all(np.diff(idx) > 0)
    assert downsample.minmax_indices(values[:10], 2000).tolist() == list(range(10))


def test_a_long_series_reaches_the_browser_as_a_few_hundred_points_with_its_ends_and_spikes():
    n = 100_000
    steps = np.arange(1, n + 1)
    values = np.random.default_rng(1).normal(size=n)
    values[31_337], values[64_000] = 40.0, -40.0  # one step's spike and dip
    df = pd.DataFrame({"step": steps, "loss/total": values})
    out = series.long_frame(df, ["loss/total"], "step", 0.9)
    assert len(out) <= downsample.MAX_POINTS <= 1000  # half a page of chart: 2 points a pixel at most
    assert out["x"].iloc[0] == 1 and out["x"].iloc[-1] == n and out["x"].is_monotonic_increasing  # the latest step shows
    assert out["raw"].max() == 40.0 and out["x"][out["raw"].idxmax()] == 31_338
    assert out["raw"].min() == -40.0 and out["x"][out["raw"].idxmin()] == 64_001
    kept = out["x"].to_numpy(dtype=int) - 1  # smoothed over every step, then picked at the kept points
    assert out["smooth"].to_numpy() == pytest.approx(series.ema(values, 0.9)[kept])


def test_long_frame_downsamples_each_series_and_skips_missing_metrics():
    steps = np.arange(1, 10_001)
    df = pd.DataFrame({"step": steps, "time": 1e9 + steps * 2.0, "wall_s": steps * 2.0 - 1.0,
                       "reward/mean": np.sin(steps / 100), "kl/mean": np.full(len(steps), np.nan)})
    out = series.long_frame(df, ["reward/mean", "kl/mean", "absent"], "step", 0.9)
    assert set(out["series"]) == {"reward/mean"} and len(out) <= downsample.MAX_POINTS
    assert out["raw"].max() == pytest.approx(df["reward/mean"].max())
    wall = series.long_frame(df, ["reward/mean"], "wall")
    # minutes since training started: the first step ended wall_s = 1 s after the start
    assert wall["x"].iloc[0] == pytest.approx(1 / 60) and wall["x"].iloc[-1] == pytest.approx(19_999 / 60)


def test_pick_columns_tile_the_plot_at_every_x_drawn_with_each_series_value_there():
    steps = np.arange(1, 10_001)
    rng = np.random.default_rng(2)
    every = rng.normal(size=len(steps))
    every_other = np.where(steps % 2 == 0, rng.normal(size=len(steps)), np.nan)  # logged on even steps only
    df = pd.DataFrame({"step": steps, "a": every, "b": every_other})
    picks = series.picks(df, ["a", "b", "absent"], "step", 0.9)
    drawn = series.long_frame(df, ["a", "b"], "step", 0.9)
    assert picks.x.tolist() == sorted(set(drawn["x"]))  # a column at every x a line has a point at
    assert len(picks.x) <= 2 * downsample.MAX_POINTS and list(picks.values) == ["a", "b"]
    # side by side from the first x to the last, each around its x: a click picks the x nearest the pointer
    assert picks.lo[0] == picks.x[0] and picks.hi[-1] == picks.x[-1] and np.array_equal(picks.lo[1:], picks.hi[:-1])
    assert np.all((picks.lo <= picks.x) & (picks.x <= picks.hi))
    assert np.allclose(picks.hi[:-1], (picks.x[:-1] + picks.x[1:]) / 2)
    rows = picks.x.astype(int) - 1
    raw, smooth = picks.values["a"]
    assert np.array_equal(raw, every[rows]) and smooth == pytest.approx(series.ema(every, 0.9)[rows])
    raw_b, smooth_b = picks.values["b"]
    odd = picks.x % 2 == 1
    assert np.isnan(raw_b[odd]).all() and np.isnan(smooth_b[odd]).all() and not np.isnan(raw_b[~odd]).any()
    empty = series.picks(pd.DataFrame(), ["a"])
    assert len(empty.x) == 0 and empty.values == {}


def test_a_chart_with_picks_has_one_tooltip_over_click_columns_and_draws_on_a_canvas():
    steps = np.arange(1, 2_001)
    df = pd.DataFrame({"step": steps, "kl/mean": np.linspace(0, 1, len(steps)), "kl/approx": np.nan})
    df.loc[df["step"] == 7, "kl/approx"] = 0.25
    lines = series.long_frame(df, ["kl/mean", "kl/approx"], "step", 0.6)
    picks = series.picks(df, ["kl/mean", "kl/approx"], "step", 0.6)
    spec = charts.line_chart(lines, title="KL", x_title="step", picks=picks)
    top = spec["layer"][-1]
    assert top["data"] == {"name": "picks"} and top["mark"]["type"] == "rect"
    assert top["params"][0]["name"] == charts.PICK and "nearest" not in top["params"][0]["select"]
    assert [layer for layer in spec["layer"] if "tooltip" in layer.get("encoding", {})] == [top]
    columns = spec["datasets"]["picks"]
    assert len(columns) == len(picks.x) and list(columns.columns) == ["x", "x_lo", "x_hi", "v0", "v1"]
    at_7 = columns[columns["x"] == 7].iloc[0]
    assert at_7["v1"] == "0.25 (raw 0.25)" and columns["v1"].iloc[-1] == "—"  # not logged there
    assert spec["usermeta"]["embedOptions"]["renderer"] == "hybrid" and spec["config"]["mark"]["aria"] is False


def test_histogram_grid_merges_steps_and_each_column_sums_to_one():
    edges = np.linspace(0.5, 1.5, 41).tolist()
    hist = pd.DataFrame({"step": range(1, 1001), "edges": [edges] * 1000,
                         "counts": [[1] * 40] * 1000})
    cells = series.histogram_grid(hist, max_columns=100)
    assert len(cells) == 100 * 40
    assert cells.groupby("step_lo")["share"].sum().to_numpy() == pytest.approx(np.ones(100))
    assert series.histogram_grid(pd.DataFrame()).empty


def test_line_chart_spec_has_zoom_legend_toggle_and_clip_rules():
    df = pd.DataFrame({"x": [1.0, 2.0], "series": ["a", "a"], "raw": [1.0, 2.0], "smooth": [1.0, 1.5]})
    spec = charts.line_chart(df, title="t", x_title="step", style=charts.LineStyle(rules=(0.8, 1.2)))
    params = [p for layer in spec["layer"] for p in layer.get("params", [])]
    assert {p["bind"] for p in params} == {"legend", "scales"}
    assert [layer["data"]["values"][0]["y"] for layer in spec["layer"] if "data" in layer] == [0.8, 1.2]
    assert spec["datasets"]["lines"] is df


def test_panels_cover_the_documented_metrics_and_ppo_extras():
    cols = ["step", "time", "wall_s", "reward/mean", "rewards/format/mean", "rewards/correctness/mean", "kl/mean",
            "clip/low", "clip/high", "ratio/min", "ratio/mean", "ratio/max", "value/loss", "lr"]
    panels = {p.title: p.metrics for p in metrics.panels(cols)}
    assert panels["Reward"] == ("reward/mean", "rewards/correctness/mean", "rewards/format/mean")
    assert panels["Losses"] == ("value/loss",)
    assert "Entropy" not in panels
    assert metrics.other_metrics(cols) == ["lr"]


def test_every_panel_has_a_live_section_and_every_closed_section_a_heading():
    from grpo_lab.dashboard.views.live import live_view

    cols = ["reward/mean", "eval/accuracy", "advantage/std", "groups/frac_zero_std", "kl/mean", "clip/low", "ratio/max",
            "entropy/mean", "loss/policy", "grad/norm", "completion/length_mean", "completion/truncated_frac",
            "perf/tokens_per_s", *(f"time/{p}_s" for p in PHASES), "value/mean", "mismatch/kl", "honesty/length_corr"]
    sections = [p.section for p in metrics.panels(cols)]
    assert set(sections) == set(metrics.SECTIONS) and metrics.SECTIONS[0] == "overview"
    assert list(live_view.section_names()) == list(metrics.SECTIONS[1:])
    assert sections.count("overview") <= 4  # first paint: a few charts (bench/bench_dashboard.py --browser)


def test_live_sections_are_the_registrys_in_page_order_each_with_a_title_in_every_language():
    """rundir/metrics.py's panels declare the sections (in the order they first name them); the
    dashboard's titles are keyed by the section id (live.section.<id>) in each locale file."""
    from grpo_lab.dashboard import i18n
    from grpo_lab.rundir import metrics as registry

    assert metrics.SECTIONS == registry.SECTIONS == (
        "overview", "update", "sampler", "completions", "speed", "value", "honesty")
    for code in i18n.LANGUAGES:
        titles = {k for k in i18n.texts(code) if k.startswith("live.section.")}
        assert titles == {f"live.section.{s}" for s in registry.SECTIONS[1:]}, code
