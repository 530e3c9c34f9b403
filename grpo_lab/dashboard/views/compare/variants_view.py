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

from grpo_lab.dashboard import markup, ui
from grpo_lab.dashboard.i18n import per_language, t
from grpo_lab.launching import pending_launches
from grpo_lab.dashboard.reading import data, variants_data
from grpo_lab.dashboard.views import metrics
from grpo_lab.dashboard.views.runs import sweeps_view
from grpo_lab.dashboard.views.charts import AUTOSIZE, Spec, _q
from grpo_lab.rundir import metrics as registry
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
               height: int = 220, domain: list[str] | None = None) -> Spec:
    """bands: variant, x, mean, low, high (one variant per colour); seeds: variant, run, x, value,
    drawn as faint lines under the band (None: not drawn). domain: every variant of the page, in
    order, so each keeps its colour on every chart (beta=0's absent KL must not pass its colour on)."""
    scale: Spec = {"scheme": "tableau10", **({"domain": domain} if domain else {})}
    drawn = [v for v in (domain or []) if v in set(bands["variant"])] if "variant" in bands else []
    colour: Spec = {"field": "variant", "type": "nominal", "title": None, "scale": scale,
                    # the legend names the lines drawn here only: a variant without one is not listed
                    "legend": {"orient": "bottom", "labelLimit": 260, **({"values": drawn} if domain else {})}}
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
            # steps read 1, 2, 3 (not 1.0 or 1.5); every x mode counts in whole units. "f", not "g": Vega
            # gives g the tick step's precision, so ticks 10 apart on a 0-19 axis read "1e+1"
            "encoding": {"x": _q("x", x_title, axis={"format": ",~f", "tickMinStep": 1}), "color": colour}, "layer": layers}


def chart_title(metric: str) -> str:
    """A band chart's title: what the metric means, in the page's language, then its registered name
    ("本步所有回答的总奖励 · reward/mean"); a name the registry lacks (a reward's own) as it is."""
    row = registry.ROWS.get(metric)
    return f"{metrics.meaning(row)} · {metric}" if row is not None else metric


def _ci(mean: float, low: float, high: float) -> str:
    if not np.isfinite(mean):
        return "—"
    if not np.isfinite(low):
        return f"{mean:.4g}"
    return f"{mean:.4g} [{low:.4g}, {high:.4g}]"


def stats_table(table: pd.DataFrame) -> pd.DataFrame:
    """variants.summary_table shown one row per variant and metric, in the current language."""
    names = metric_names()
    return pd.DataFrame({
        t("variants.variant"): table["variant"], t("variants.metric"): table["metric"].map(names),
        t("variants.mean_ci"): [_ci(*v) for v in zip(table["mean"], table["ci_low"], table["ci_high"])],
        t("variants.iqm"): [f"{v:.4g}" if np.isfinite(v) else "—" for v in table["iqm"].astype(float)],  # as mean_ci
        t("variants.n"): table["n"]})


def verdict_line(runs: pd.DataFrame, a: str, b: str, metric: str) -> str:
    """The sentence the difference b - a in `metric` supports, in the current language."""
    xa, xb = runs.loc[runs["variant"] == a, metric], runs.loc[runs["variant"] == b, metric]
    if variants.measured(xa) != variants.measured(xb):  # e.g. final KL of beta 0 (no reference) beside beta 0.04
        missing = markup.md(b if variants.measured(xa) else a)
        return t("kl_absent.verdict_not_measured", metric=metric_names()[metric], name=missing)
    d = variants.difference(xa, xb)
    kind, fields = variants.verdict_parts(d, markup.md(a), markup.md(b))
    name = metric_names()[metric]
    if kind == "unclear" and fields["needed"] is None:
        kind = "equal"
    return t(f"variants.verdict_{kind}", metric=name, **fields)


def render(groups: dict[str, list[RunInfo]], heading: str, summary: str | None = None) -> None:
    """The variants of `groups` (label -> the runs that are its seeds); `summary`, the line under
    the heading (a sweep's counts, queued and launching runs included), else the runs' states."""
    st.subheader(heading)
    counts = sweeps_view.count_states(r.state for rs in groups.values() for r in rs)
    st.caption(summary or t("variants.summary", variants=len(groups), runs=sum(counts.values()),
                            states=", ".join(f"{ui.state_label(s)} {n}" for s, n in counts.items())))
    c1, c2, c3 = st.columns([3, 2, 1])
    x_mode = c2.selectbox(t("chart.x_axis"), list(variants.X_MODES), key=per_language("var_x"),
                          format_func=x_names().get) or "step"
    seeds = c3.toggle(t("variants.show_seeds"), value=False, key="var_seeds")
    # everything below is cached on the runs' scalars parts (reading/variants_data.py): a rerun
    # with nothing new reads no table and computes no statistic
    key, problems = variants_data.data_key(groups)
    columns, more = variants_data.present(key)
    ui.warn(problems + more)
    if not columns:
        st.info(t("variants.no_data"))
        return
    chosen = c1.multiselect(t("compare.metrics"), list(columns), default=[m for m in DEFAULT_METRICS if m in columns],
                            key="var_metrics")
    for metric in chosen:
        bands, per_seed = variants_data.bands(key, metric, x_mode, seeds)
        st.vega_lite_chart(spec=band_chart(bands, per_seed, title=chart_title(metric), x_title=x_names()[x_mode],
                                           domain=list(groups)),
                           key=f"var_chart_{metric}")
    st.subheader(t("variants.table"))
    threshold = st.number_input(t("variants.threshold"), value=0.5, step=0.05, key="var_threshold",
                                help=t("variants.threshold_help"))
    runs, table = variants_data.stats(key, float(threshold))
    st.dataframe(stats_table(table), hide_index=True)
    labels = list(groups)
    if len(labels) >= 2:
        st.subheader(t("variants.difference"))
        c1, c2, c3 = st.columns(3)
        a = c1.selectbox(t("variants.baseline"), labels, index=0, key="var_a")
        b = c2.selectbox(t("variants.other"), labels, index=1, key="var_b")
        metric = c3.selectbox(t("variants.metric"), list(variants.METRICS), key=per_language("var_metric"),
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
    runs = data.runs()
    pending = pending_launches.pending(data.runs_dir(), {r.name for r in runs})
    counts = sweeps_view.sweep_counts(sweep, runs, pending, data.runs_dir())  # the Runs page's count, queue included
    render(groups, t("variants.sweep_heading", sweep=markup.md(sweep)), summary=sweeps_view.summary_line(sweep, counts))
