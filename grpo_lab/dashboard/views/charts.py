"""Chart builders: Vega-Lite specs as plain dicts, drawn with `st.vega_lite_chart(spec=...)`.

Plain dicts rather than Altair objects because Altair validates every object it builds, which
costs ~50 ms a chart: too slow for a live page redrawing a dozen charts every two seconds.
Data comes in already downsampled (dashboard.series); no I/O here.

Every line chart: x zoom and pan (drag, wheel; double-click resets), a legend whose entries
toggle their series (shift-click for several), the smoothed curve bold with the raw one faint.
Titles, axis names and tooltips are in the current language (dashboard/locales/, chart.*).

Line charts draw their marks on a canvas (Vega's "hybrid" renderer: titles, axes and legends stay SVG
text, for screen readers and tests), without an ARIA label per mark: below 2,000 marks Streamlit's
Vega renders SVG, one DOM element with an ARIA label per point, and Vega evaluates every encoding of
every mark through its expression interpreter (no eval under Streamlit's CSP), so the marks are the
browser's cost. Live's first paint of a 10,000-step run (three charts, six curves) in Chromium, on
2 cores at load 2.4-3.5: 1.34 s (the renderer's CPU 1.52 s) as SVG with a Voronoi cell per point
and 600 points a curve; 0.96 s (1.09 s) on canvases with the click columns of pick_layer and 400
points a curve (reading/downsample.MAX_POINTS); a 20-step run 0.70 s either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from grpo_lab.dashboard.i18n import t
from grpo_lab.dashboard.views.series import Picks

Spec = dict[str, Any]
# Streamlit's theme fits the whole chart (title, legend, axes) into `height`; fit only the width,
# so `height` is the plot's own height.
AUTOSIZE = {"type": "fit-x", "contains": "padding"}
ADV_COLOURS = {"pos": "#1a9850", "neg": "#d73027", "zero": "#9e9e9e"}
BOUND_COLOUR = "#ff4b4b"


def _q(field: str, title: str | None = None, **extra: Any) -> Spec:
    out: Spec = {"field": field, "type": "quantitative", **extra}
    if title is not None:
        out["title"] = title
    return out


def _zoom(name: str = "zoom") -> Spec:
    return {"name": name, "select": {"type": "interval", "encodings": ["x"]}, "bind": "scales"}


@dataclass(frozen=True)
class LineStyle:
    """How a line chart draws its series: the options that travel together from a page to the spec."""

    smoothing: bool = True  # the smoothed curve bold over the raw one, faint
    colour_field: str = "series"  # the column that names each line
    colour_title: str | None = None  # the legend's heading
    domain: list[str] | None = None  # a fixed colour order (Compare: each run keeps its colour)
    log_y: bool = False
    stacked: bool = False  # areas stacked from zero: parts of a whole
    rules: tuple[float, ...] = ()  # dashed horizontal lines (the clip bounds)
    height: int = 180


def line_chart(df: pd.DataFrame, *, title: str, x_title: str, y_title: str = "", help: str | list[str] = "",
               x_steps: bool = False, style: LineStyle = LineStyle(), picks: Picks | None = None) -> Spec:
    """Lines of `df` (x, <style.colour_field>, raw, smooth), one colour per series (or per run);
    `help` the subtitle (a line or lines); `x_steps`: x counts steps (no ticks between two steps);
    `picks` (series.picks of the same curves): a click picks the x nearest the pointer (PICK; Live opens
    Groups at that step), and the tooltip shows every series at that x."""
    colour_field, smoothing, log_y, stacked = style.colour_field, style.smoothing, style.log_y, style.stacked
    colour: Spec = {"field": colour_field, "type": "nominal", "title": style.colour_title,
                    "scale": {"scheme": "tableau10", **({"domain": style.domain} if style.domain else {})},
                    "legend": {"orient": "bottom", "labelLimit": 260, "columns": 3}}
    shown = {"param": "legend", "empty": True}
    y_field = "smooth" if smoothing else "raw"
    y_scale = {"type": "log"} if log_y else {"zero": stacked}
    layers: list[Spec] = []
    if stacked:
        layers.append({
            "params": [{"name": "legend", "select": {"type": "point", "fields": [colour_field]}, "bind": "legend"},
                       _zoom()],
            "mark": {"type": "area", "clip": True, "opacity": 0.85},
            "encoding": {"y": _q(y_field, y_title, scale=y_scale, stack="zero"),
                         "tooltip": [{"field": colour_field, "type": "nominal"}, _q("x", x_title, format=",.4~g"),
                                     _q(y_field, t("chart.seconds"), format=",.4~g")]},
        })
    else:
        if smoothing:  # the raw values, faint, under the smoothed line
            layers.append({
                "mark": {"type": "line", "strokeWidth": 1, "clip": True},
                "encoding": {"y": _q("raw", y_title, scale=y_scale),
                             "opacity": {"condition": {**shown, "value": 0.25}, "value": 0.03}},
            })
        layers.append({
            "params": [{"name": "legend", "select": {"type": "point", "fields": [colour_field]}, "bind": "legend"},
                       _zoom()],
            # a series of one point has no line to draw: its points are marked
            "mark": {"type": "line", "strokeWidth": 2 if smoothing else 1.5, "clip": True,
                     **({"point": {"filled": True, "size": 40}} if _single_points(df, colour_field) else {})},
            "encoding": {
                "y": _q(y_field, y_title, scale=y_scale),
                "opacity": {"condition": {**shown, "value": 1.0}, "value": 0.08},
                "tooltip": [{"field": colour_field, "type": "nominal"}, _q("x", x_title, format=",.4~g"),
                            _q("smooth", t("chart.smoothed"), format=",.4~g"),
                            _q("raw", t("chart.raw"), format=",.4~g")],
            },
        })
    datasets = {"lines": df}
    if picks is not None:  # last: on top of the lines, whose clicks would otherwise go to them
        for layer in layers:  # the columns carry the tooltip, and cover the lines
            layer["encoding"].pop("tooltip", None)
        datasets["picks"] = pick_columns(picks, smoothing)
        layers.append(pick_layer(x_title, list(picks.values)))
    for value in style.rules:
        layers.append({"data": {"values": [{"y": value}]}, "mark": {"type": "rule", "strokeDash": [4, 4]},
                       "encoding": {"y": _q("y"), "color": {"value": "#888"}}})
    spec: Spec = {
        "datasets": datasets, "data": {"name": "lines"}, "height": style.height, "autosize": AUTOSIZE,
        "title": {"text": title, "subtitle": help} if help else title,
        "encoding": {"x": _q("x", x_title, axis={"tickMinStep": 1} if x_steps else {}),
                     "color": colour},
        "layer": layers,
        # a canvas, and no ARIA label per mark (the module's docstring says why)
        "usermeta": {"embedOptions": {"renderer": "hybrid"}}, "config": {"mark": {"aria": False}},
    }
    return spec


PICK = "pick"  # the point selection of a chart with picks: [{"x": the clicked step}]


def _number(value: float) -> str:
    return "—" if value != value else f"{value:,.4g}"  # NaN: the series has no value at that x


def pick_columns(picks: Picks, smoothing: bool) -> pd.DataFrame:
    """series.Picks as the pick layer's rows: x, the column's ends, and per series (v0, v1, ... in the
    order of picks.values) its value at x as text: "smoothed (raw r)", the raw value alone, or "—" where
    the series has none. Text made here, once, rather than a Vega format() per mark and field."""
    out = pd.DataFrame({"x": picks.x, "x_lo": picks.lo, "x_hi": picks.hi})
    raw_word = t("chart.raw")
    for i, (raw, smooth) in enumerate(picks.values.values()):
        out[f"v{i}"] = [f"{_number(s)} ({raw_word} {_number(r)})" if smoothing and r == r else _number(r)
                        for r, s in zip(raw, smooth)]
    return out


def pick_layer(x_title: str, names: list[str]) -> Spec:
    """Transparent columns over the plot (pick_columns' rows), one per x drawn, each reaching halfway to
    its neighbours: a click anywhere picks the x nearest the pointer (a point selection of the column's
    x), and hovering shows every series at that x. Columns, not Vega-Lite's `nearest` over the points:
    that builds a Voronoi cell per point (3,600 on Live's first paint of a long run at 600 points a
    curve), each an SVG path Vega parses again to draw and bound: ~0.5 s of the browser's CPU."""
    return {"data": {"name": "picks"},
            "params": [{"name": PICK, "select": {"type": "point", "on": "click", "fields": ["x"], "clear": False}}],
            "mark": {"type": "rect", "fill": "transparent", "clip": True},
            "encoding": {"x": _q("x_lo", x_title), "x2": {"field": "x_hi"}, "color": {"value": "transparent"},
                         "tooltip": [_q("x", x_title, format=",.4~g"),
                                     *({"field": f"v{i}", "type": "nominal", "title": name}
                                       for i, name in enumerate(names))]}}


def picked_x(selection) -> float | None:
    """The x a click on a chart with picks picked (st.vega_lite_chart's returned selection), else None."""
    points = (selection or {}).get(PICK) or []
    value = points[0].get("x") if points and isinstance(points[0], dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def _single_points(df: pd.DataFrame, colour_field: str) -> bool:
    """Whether some series of `df` has a single point (a run with one logged step)."""
    return colour_field in df and not df.empty and int(df.groupby(colour_field).size().min()) == 1


def ratio_heatmap(cells: pd.DataFrame, low: float, high: float, height: int = 260) -> Spec:
    """Share of tokens per ratio bin (y) over steps (x), with 1-eps and 1+eps dashed."""
    bounds = [{"y": low, "bound": f"1-eps = {low:.3g}"}, {"y": high, "bound": f"1+eps = {high:.3g}"}]
    return {
        "datasets": {"cells": cells}, "height": height, "autosize": AUTOSIZE, "title": t("chart.heatmap_title"),
        "layer": [
            {"data": {"name": "cells"}, "params": [_zoom("heat_zoom")], "mark": "rect",
             "encoding": {
                 "x": _q("step_lo", t("chart.x_step")), "x2": {"field": "step_hi"},
                 "y": _q("ratio_lo", t("chart.ratio_axis"), scale={"domain": [0.5, 1.5]}), "y2": {"field": "ratio_hi"},
                 "color": _q("share", t("chart.share_of_tokens"), scale={"type": "sqrt", "scheme": "viridis"}),
                 "tooltip": [_q("step_lo", t("chart.from_step")), _q("step_hi", t("chart.to_step")),
                             _q("ratio_lo", t("chart.ratio_from"), format=".3f"),
                             _q("share", t("chart.share"), format=".2%")],
             }},
            {"data": {"values": bounds}, "mark": {"type": "rule", "strokeDash": [6, 3], "strokeWidth": 2,
                                                  "color": BOUND_COLOUR},
             "encoding": {"y": _q("y"), "tooltip": [{"field": "bound", "type": "nominal"}]}},
        ],
    }


def ratio_bars(bars: pd.DataFrame, low: float, high: float, step: int, height: int = 260) -> Spec:
    """One step's ratio histogram; bins beyond the clip bounds in red, bounds dashed."""
    names = {"below 1-eps": t("chart.below"), "inside": t("chart.inside"), "above 1+eps": t("chart.above")}
    bars = bars.assign(zone=bars["zone"].map(names))  # series.histogram_bars' zones, named in the current language
    zones = {"domain": list(names.values()), "range": [BOUND_COLOUR, "#4c78a8", BOUND_COLOUR]}
    return {
        "datasets": {"bars": bars}, "height": height, "autosize": AUTOSIZE, "title": t("chart.bars_title", step=step),
        "layer": [
            {"data": {"name": "bars"}, "mark": "rect",
             "encoding": {
                 "x": _q("ratio_lo", t("chart.ratio_axis"), scale={"domain": [0.5, 1.5]}), "x2": {"field": "ratio_hi"},
                 "y": _q("tokens", t("chart.tokens")),
                 "color": {"field": "zone", "type": "nominal", "title": t("chart.zone"), "scale": zones,
                           "legend": {"orient": "bottom"}},
                 "tooltip": [_q("ratio_lo", t("chart.from"), format=".3f"), _q("ratio_hi", t("chart.to"), format=".3f"),
                             _q("tokens", t("chart.tokens")),
                             {"field": "zone", "type": "nominal", "title": t("chart.zone")}],
             }},
            {"data": {"values": [{"x": low}, {"x": high}]}, "mark": {"type": "rule", "strokeDash": [6, 3],
                                                                      "color": BOUND_COLOUR},
             "encoding": {"x": _q("x")}},
        ],
    }


def prompt_history(df: pd.DataFrame, height: int = 200) -> Spec:
    """One prompt's groups over steps: mean reward (line) and the advantage range (band)."""
    return {
        "datasets": {"groups": df}, "data": {"name": "groups"}, "height": height, "autosize": AUTOSIZE,
        "title": t("chart.prompt_title"),
        "encoding": {"x": _q("step", t("chart.x_step"))},
        "layer": [
            {"mark": {"type": "area", "opacity": 0.2, "color": "#4c78a8"},
             "encoding": {"y": _q("a_min", t("chart.adv_or_reward")), "y2": {"field": "a_max"}}},
            {"params": [_zoom()], "mark": {"type": "line", "point": True, "color": ADV_COLOURS["pos"]},
             "encoding": {"y": _q("mean_reward"),
                          "tooltip": [_q("step", t("chart.x_step")),
                                      _q("mean_reward", t("chart.mean_reward"), format=".3f"),
                                      _q("std", t("chart.std"), format=".3f")]}},
        ],
    }
