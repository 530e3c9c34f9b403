"""Compare variants, not runs: each variant's mean curve with a 95% band across its seeds, the
per-metric table (mean, 95% CI, IQM, n) and, for two variants, the difference and what it supports.

The band and the intervals are Student t-intervals over seeds (grpo_lab/rundir/variants.py says
why not a bootstrap); the chart is a plain Vega-Lite spec (area for the band, line for the mean,
optionally one faint line per seed), as the other charts here, for speed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from grpo_lab.dashboard import ui
from grpo_lab.dashboard.i18n import t
from grpo_lab.dashboard.reading import variants_data
from grpo_lab.dashboard.views import markup
from grpo_lab.dashboard.views.charts import AUTOSIZE, Spec, _q
from grpo_lab.rundir import variants
from grpo_lab.rundir.reader import RunInfo

DEFAULT_METRICS = ["reward/mean", "kl/mean"]


def x_names() -> dict[str, str]:
    return {m: t(f"variants.x_{m}") for m in variants.X_MODES}


METRIC_KEYS = {"final reward": "variants.metric_final_reward", "best reward": "variants.metric_best_reward",
               "reward AUC": "variants.metric_reward_AUC", "final KL": "variants.metric_final_KL",
               "steps to threshold": "variants.metric_steps_to_threshold"}  # variants.METRICS, worded


def metric_names() -> dict[str, str]:
    return {m: t(METRIC_KEYS[m]) for m in variants.METRICS}


def band_chart(bands: pd.DataFrame, seeds: pd.DataFrame | None, *, title: str, x_title: str,
               height: int = 220) -> Spec:
    """bands: variant, x, mean, low, high (one variant per colour); seeds: variant, run, x, value,
    drawn as faint lines under the band (None: not drawn)."""
    colour: Spec = {"field": "variant", "type": "nominal", "title": None, "scale": {"scheme": "tableau10"},
                    "legend": {"orient": "bottom", "labelLimit": 260}}
    layers: list[Spec] = []
    if seeds is not None and not seeds.empty:
        layers.append({"data": {"name": "seeds"},
                       "mark": {"type": "line", "strokeWidth": 1, "opacity": 0.25, "clip": True},
                       "encoding": {"y": _q("value", title), "detail": {"field": "run", "type": "nominal"}}})
    layers.append({"mark": {"type": "area", "opacity": 0.2, "clip": True},
                   "encoding": {"y": _q("low", title), "y2": {"field": "high"}}})  # one y title for all
    layers.append({"params": [{"name": "zoom", "select": {"type": "interval", "encodings": ["x"]}, "bind": "scales"}],
                   "mark": {"type": "line", "strokeWidth": 2, "clip": True},
                   "encoding": {"y": _q("mean", title),
                                "tooltip": [{"field": "variant", "type": "nominal"}, _q("x", x_title, format=",.4~g"),
                                            _q("mean", t("variants.mean"), format=",.4~g"),
                                            _q("low", t("variants.ci_low"), format=",.4~g"),
                                            _q("high", t("variants.ci_high"), format=",.4~g"), _q("n", "n")]}})
    datasets = {"bands": bands}
    if seeds is not None:
        datasets["seeds"] = seeds
    return {"datasets": datasets, "data": {"name": "bands"}, "height": height, "autosize": AUTOSIZE,
            "title": {"text": title, "subtitle": t("variants.band_help")},
            "encoding": {"x": _q("x", x_title), "color": colour}, "layer": layers}


def bands_of(long: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per variant and x: mean and 95% band of `metric` across seeds. Runs log the same steps, so
    x is bucketed by step: the band at a step averages each seed's x there (a seed's wall time)."""
    parts = []
    for label, part in long.groupby("variant", sort=False):
        b = variants.band(part.rename(columns={metric: "value"})[["run", "step", "value"]], "step")
        b["x"] = b["step"].map(part.groupby("step")["x"].mean())
        b["variant"] = label
        parts.append(b)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["variant", "step", "x", "mean", "low", "high", "n"])


def _ci(row) -> str:
    if not np.isfinite(row["mean"]):
        return "—"
    if not np.isfinite(row["ci_low"]):
        return f"{row['mean']:.4g}"
    return f"{row['mean']:.4g} [{row['ci_low']:.4g}, {row['ci_high']:.4g}]"


def stats_table(runs: pd.DataFrame, groups: dict[str, list[RunInfo]]) -> pd.DataFrame:
    """variants.summary_table shown one row per variant and metric, in the current language."""
    table = variants.summary_table(runs, {label: [r.name for r in rs] for label, rs in groups.items()})
    names = metric_names()
    return pd.DataFrame({
        t("variants.variant"): table["variant"], t("variants.metric"): table["metric"].map(names),
        t("variants.mean_ci"): table.apply(_ci, axis=1), t("variants.iqm"): table["iqm"].round(4),
        t("variants.n"): table["n"]})


def verdict_line(runs: pd.DataFrame, a: str, b: str, metric: str) -> str:
    """The sentence the difference b - a in `metric` supports, in the current language."""
    d = variants.difference(runs.loc[runs["variant"] == a, metric], runs.loc[runs["variant"] == b, metric])
    kind, fields = variants.verdict_parts(d, markup.md(a), markup.md(b))
    name = metric_names()[metric]
    if kind == "unclear" and fields["needed"] is None:
        kind = "equal"
    return t(f"variants.verdict_{kind}", metric=name, **fields)


def render(groups: dict[str, list[RunInfo]], heading: str) -> None:
    """The variants of `groups` (label -> the runs that are its seeds)."""
    st.subheader(heading)
    st.caption(t("variants.summary", variants=len(groups), runs=sum(len(rs) for rs in groups.values()),
                 states=", ".join(f"{ui.state_label(s)} {n}" for s, n in
                                  pd.Series([r.state for rs in groups.values() for r in rs]).value_counts().items())))
    c1, c2, c3 = st.columns([3, 2, 1])
    x_mode = c2.selectbox(t("chart.x_axis"), list(variants.X_MODES), key="var_x", format_func=x_names().get) or "step"
    seeds = c3.toggle(t("variants.show_seeds"), value=False, key="var_seeds")
    long, problems = variants_data.stacked(groups, ["reward/mean", "kl/mean", "completion/length_mean"], x_mode)
    ui.warn(problems)
    if long.empty:
        st.info(t("variants.no_data"))
        return
    columns = [c for c in ("reward/mean", "kl/mean", "completion/length_mean") if long[c].notna().any()]
    chosen = c1.multiselect(t("compare.metrics"), columns, default=[m for m in DEFAULT_METRICS if m in columns],
                            key="var_metrics")
    for metric in chosen:
        bands = bands_of(long, metric)
        per_seed = long[["variant", "run", "x", metric]].rename(columns={metric: "value"}) if seeds else None
        st.vega_lite_chart(spec=band_chart(bands, per_seed, title=metric, x_title=x_names()[x_mode]),
                           key=f"var_chart_{metric}")
    st.subheader(t("variants.table"))
    threshold = st.number_input(t("variants.threshold"), value=0.5, step=0.05, key="var_threshold",
                                help=t("variants.threshold_help"))
    runs = variants_data.run_stats(long, float(threshold))
    st.dataframe(stats_table(runs, groups), hide_index=True)
    labels = list(groups)
    if len(labels) >= 2:
        st.subheader(t("variants.difference"))
        c1, c2, c3 = st.columns(3)
        a = c1.selectbox(t("variants.baseline"), labels, index=0, key="var_a")
        b = c2.selectbox(t("variants.other"), labels, index=1, key="var_b")
        metric = c3.selectbox(t("variants.metric"), list(variants.METRICS), key="var_metric",
                              format_func=metric_names().get)
        if a == b:
            st.info(t("variants.same_variant"))
        else:
            st.markdown(verdict_line(runs, a, b, metric))


def render_sweep(sweep: str) -> None:
    """The Compare page for `?sweep=NAME`."""
    groups = variants_data.sweep_variants(sweep)
    if not groups:
        st.warning(t("variants.no_sweep", sweep=markup.md(sweep)))
        return
    render(groups, t("variants.sweep_heading", sweep=markup.md(sweep)))
