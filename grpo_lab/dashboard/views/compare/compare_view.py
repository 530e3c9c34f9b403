"""The Compare page's body: overlaid curves, summary, config diff, and the runs' completions to one prompt
side by side (compare_completions_view)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import streamlit as st

from grpo_lab.dashboard import markup, pages, ui
from grpo_lab.launching import form_fields
from grpo_lab.dashboard.reading import data, variants_data
from grpo_lab.dashboard.views import charts, series
from grpo_lab.dashboard.views.compare import compare_completions_view, fork_lines, more_seeds_view
from grpo_lab.dashboard.views.runs import annotations_view
from grpo_lab.dashboard.i18n import t
from grpo_lab.rundir import variants
from grpo_lab.rundir.importers import names as trl_names
from grpo_lab.rundir.layout import SOURCES_KEY
from grpo_lab.rundir.reader import RunInfo

DEFAULT_METRICS = ["reward/mean", "kl/mean", "clip/total", "completion/length_mean"]
IGNORED_KEYS = {"name", "runs_dir", "resume", SOURCES_KEY}  # differ by construction, or not an option







def reward_name(column: str) -> str:
    """A metric named as Compare matches it across sources (rundir/importers/names.comparable):
    `rewards/trl.rewards:accuracy_reward/mean` (a native run naming a module's function) as
    `rewards/accuracy_reward/mean` (a TRL run), a factory's by the reward it returns, and a TRL
    import's `trl/<log_metric name>` as `rewards/log/<name>`.

    >>> reward_name("rewards/trl.rewards:accuracy_reward/mean"), reward_name("reward/mean")
    ('rewards/accuracy_reward/mean', 'reward/mean')
    >>> reward_name("rewards/trl.rewards:get_cosine_scaled_reward/mean"), reward_name("trl/judge_s")
    ('rewards/cosine_scaled_reward/mean', 'rewards/log/judge_s')
    """
    return trl_names.comparable(column)


def _scalars(name: str) -> pd.DataFrame:
    """A run's scalars with reward metrics named by function (see reward_name)."""
    df = data.scalars(name).df
    if absent := [c for c in variants.unmeasured(data.run(name).config) if c in df]:  # beta 0: no KL measured
        df = df.assign(**{c: np.nan for c in absent})
    return df.rename(columns={c: reward_name(c) for c in df.columns})


def summary(runs: list[RunInfo]) -> pd.DataFrame:
    rows = []
    for r in runs:
        df = _scalars(r.name)

        def last(col: str):
            return float(df[col].dropna().iloc[-1]) if col in df and df[col].notna().any() else np.nan

        best = df["reward/mean"].max() if "reward/mean" in df and not df.empty else np.nan
        best_step = int(df.loc[df["reward/mean"].idxmax(), "step"]) if not np.isnan(best) else None
        rows.append({
            "run": r.name, "state": ui.state_label(r.state), "algo": r.get("algo", "—"),
            "steps": f"{r.step} / {r.total_steps or '?'}",
            "final reward": last("reward/mean"), "best reward": best, "best at step": best_step,
            # beta 0: no reference model, no KL: said, not a blank that reads like 0
            "final KL": (t("compare.not_measured") if "kl/mean" in variants.unmeasured(r.config)
                         else "—" if np.isnan(kl := last("kl/mean")) else f"{kl:.4f}"),
            "final clip fraction": last("clip/total"),
            "wall time": ui.duration(ui.run_duration(r)),
        })
    return pd.DataFrame(rows)


SOURCE_KEYS = {"command line": "compare.source_command_line", "config file": "compare.source_config_file",
               "default": "compare.source_default", "resumed run": "compare.source_resumed"}


def source_name(source: str) -> str:
    """Where an option's value came from (config.json's sources), in the page's language;
    "task default (arithmetic)" as "<task default> (arithmetic)", anything else as written."""
    head, _, rest = str(source).partition(" (")
    if source in SOURCE_KEYS:
        return t(SOURCE_KEYS[source])
    if head in ("task default", "model default"):
        return t(f"compare.source_{head.split()[0]}_default") + " (" + rest
    return str(source)


def config_diff(runs: list[RunInfo]) -> pd.DataFrame:
    """Only the options whose values differ between the runs (one column per run).

    An option missing from an older run's config.json had the trainer's default then; it is
    compared as today's default, so a newly added option does not show as a difference.
    """
    defaults = {k: v["default"] for k, v in form_fields.config_fields().items()}
    # an imported run (TRL, verl) had another trainer's defaults, not ours: only what it wrote is shown
    configs = {r.name: {**({} if (r.config or {}).get("source") else defaults), **(r.config or {})} for r in runs}
    # another trainer's own options (trl/...) have no counterpart in a native run: not compared here
    keys = sorted(k for k in set().union(*(r.config or {} for r in runs)) - IGNORED_KEYS if "/" not in k)

    def show(v):
        return json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else ("—" if v is None else str(v))

    rows = {k: {n: show(c.get(k)) for n, c in configs.items()} for k in keys}
    differing = {k: v for k, v in rows.items() if len(set(v.values())) > 1}
    # where each differing value came from (config.json's sources; absent in older runs)
    sources = {r.name: (r.config or {}).get(SOURCES_KEY) or {} for r in runs}
    shown = {k: {n: v + (f"  ({source_name(sources[n][k])})" if isinstance(sources[n], dict) and sources[n].get(k) else "")
                 for n, v in row.items()} for k, row in differing.items()}
    return pd.DataFrame.from_dict(shown, orient="index").rename_axis("option").reset_index()


def seeds_caution(runs: list[RunInfo]) -> None:
    """Said before any curve: configs run with one seed cannot be compared yet (the variants verdict
    needs 2 seeds each), and where to add seeds."""
    groups = variants_data.runs_as_variants(runs) if len(runs) >= 2 else {}
    single = [label for label, members in groups.items() if len(members) < 2]
    if len(groups) >= 2 and single:
        st.warning(t("compare.too_few_seeds", variants=", ".join(f"**{markup.md(label)}**" for label in single)))
        more_seeds_view.offer([[r.name for r in groups[label]] for label in single])  # queued from here
        st.page_link(pages.path("runs"), label=t("compare.add_seeds"), icon=pages.icon("runs"))


def curves(runs: list[RunInfo], chosen: list[str], x_mode: str, smoothing: float) -> None:
    names = [r.name for r in runs]
    problems = []
    grid = st.columns(2)
    for i, metric in enumerate(chosen):
        frames = []
        for r in runs:
            frame = data.scalars(r.name)
            problems += [f"{r.name}: {p}" for p in frame.problems]
            df = fork_lines.with_history(r.name, frame.df)  # a fork: from its step on its parent's curve
            frames.append(series.long_frame(df.rename(columns={c: reward_name(c) for c in df.columns}),
                                            [metric], x_mode, smoothing, label=r.name))
        df = pd.concat(frames, ignore_index=True)
        spec = charts.line_chart(df, title=metric, x_title=ui.x_title(x_mode), x_steps=x_mode == "step",
                                 style=charts.LineStyle(smoothing=smoothing > 0, colour_title=t("col.run"), domain=names))
        with grid[i % 2]:
            st.vega_lite_chart(spec=spec, key=f"compare_chart_{i}")
    ui.warn(problems)


def render() -> None:
    all_runs = data.runs()
    names = [r.name for r in all_runs]
    if len(names) < 1:
        st.info(t("ui.no_runs"))
        return
    current = st.session_state.get("cmp_runs")
    explicit = []
    if current is None:  # a link such as /compare?runs=a,b (Runs' compare button)
        explicit = [n for n in st.query_params.get("runs", "").split(",") if n in names]
    if explicit or current is None or not set(current) <= set(names):
        selected = st.session_state.get(ui.SELECTED)
        first = explicit or ([selected] if selected in names else [])
        st.session_state["cmp_runs"] = (first + [n for n in names if n not in first])[:max(2, len(first))]
    chosen_runs = st.multiselect(t("compare.runs"), names, key="cmp_runs", placeholder=t("compare.runs_placeholder"))
    by_name = {r.name: r for r in all_runs}
    runs = [by_name[n] for n in chosen_runs if n in by_name]  # in the order picked
    annotations_view.compare_lines(runs)  # each run's tags and note (set on the Runs page)
    seeds_caution(runs)
    if len(runs) < 2:
        st.info(t("compare.pick_two"))
        if not runs:
            return
    columns = sorted(set().union(*(_scalars(r.name).columns for r in runs)) - {"step", "time", "wall_s"})
    c1, c2, c3 = st.columns([3, 1, 2])
    chosen = c1.multiselect(t("compare.metrics"), columns, default=[m for m in DEFAULT_METRICS if m in columns],
                            key="cmp_metrics")
    x_mode = c2.segmented_control(t("chart.x_axis"), ["step", "wall"], default="step", key="cmp_x", required=True,
                                  format_func=ui.x_names().get) or "step"
    smoothing = c3.slider(t("chart.smoothing"), 0.0, 0.99, 0.6, 0.01, key="cmp_smoothing",
                          help=t("chart.smoothing_help"))
    curves(runs, chosen, x_mode, smoothing)
    st.subheader(t("compare.summary"))
    table = summary(runs)
    st.dataframe(table, hide_index=True, column_config=ui.column_config(table.columns, formats={
        c: "%.4f" for c in ("final reward", "best reward", "final clip fraction")}))
    st.subheader(t("compare.config"))
    diff = config_diff(runs)
    if diff.empty:
        st.caption(t("compare.same_config"))
    else:
        st.dataframe(diff, hide_index=True, column_config=ui.column_config(["option"]))
    if len(runs) >= 2:
        compare_completions_view.render(runs)
