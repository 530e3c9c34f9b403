"""The Live page's body, run inside `st.fragment(run_every=...)` so only it refreshes."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from dashboard import charts, data, metrics, series, ui

# Runs written by another trainer (config.json / status.json `source`, docs/trl-and-verl.md): what it
# does not give us, said once instead of drawing empty charts.
NOT_LOGGED = {
    "trl": ("Not logged by TRL",
            "per-token ratios (the ratio chart and histogram), advantage statistics, token detail"),
    "verl": ("Not in a verl rollout dump",
             "everything but rewards and the recomputed advantages: KL, clipping, ratios, entropy, losses, "
             "lengths, token detail"),
}


@st.cache_resource(max_entries=512, show_spinner=False)
def _lines(run: str, version: tuple, panel: tuple[str, ...], x_mode: str, smoothing: float, _df) -> pd.DataFrame:
    return series.long_frame(_df, list(panel), x_mode, smoothing)


@st.cache_resource(max_entries=64, show_spinner=False)
def _heat(run: str, version: tuple, _df) -> pd.DataFrame:
    return series.histogram_grid(_df)


def other_metric_names(run: str) -> list[str]:
    df = data.scalars(run).df
    return metrics.other_metrics(list(df.columns)) if not df.empty else []


def header(info, frame: data.Frame) -> None:
    cols = st.columns([1, 2, 1, 1])
    cols[0].metric("State", ui.state_label(info.state))
    total = info.total_steps or 1
    cols[1].progress(min(info.step / total, 1.0), text=f"step {info.step} / {info.total_steps or '?'}")
    reward = data.latest(frame, "reward/mean")
    cols[2].metric("Latest reward", "—" if reward is None else f"{reward:.3f}")
    cols[3].metric("Elapsed", ui.duration(ui.run_duration(info)))
    if info.error:
        st.error(f"**Error:** {info.error}")


def doctor_banner(run: str, info) -> None:
    """The run doctor's findings (tables/events): the worst first, each with its step and likely fix."""
    found = data.events(run)
    if found.empty:
        return
    stop_reason = (info.status or {}).get("stop_reason")
    worst = "critical" if (found["severity"] == "critical").any() else "warning" if (
        found["severity"] == "warning").any() else "info"
    lines = [f"- {data.SEVERITY_ICONS.get(r.severity, '')} **step {r.step} · {r.kind}**: {r.message}. "
             f"*Try:* {r.suggestion}" for r in found.sort_values("step", ascending=False).head(5).itertuples()]
    more = f"\n\n…and {len(found) - 5} earlier findings (tables/events)." if len(found) > 5 else ""
    head = f"**Stopped by the run doctor:** {stop_reason}\n\n" if stop_reason else "**The run doctor found:**\n\n"
    {"critical": st.error, "warning": st.warning, "info": st.info}[worst](head + "\n".join(lines) + more)


def not_logged(info) -> tuple[str, str] | None:
    """(heading, what is missing) when the run comes from another trainer that does not log everything we do."""
    return NOT_LOGGED.get(str(info.get("source") or ""))


def render(run: str, x_mode: str, smoothing: float, extra: list[str], was_active: bool) -> None:
    info = data.run(run)
    if was_active and info.state not in data.ACTIVE_STATES:
        st.rerun(scope="app")  # the run ended: redraw the page once more, without the timer
    frame = data.scalars(run)
    header(info, frame)
    doctor_banner(run, info)
    ui.warn(info.problems + frame.problems)
    if frame.df.empty:
        st.info("No step has been logged yet: the trainer writes its first rows after its first step "
                "(and a warm start first). This view refreshes by itself.")
        return
    cols = list(frame.df.columns)
    panels = metrics.panels(cols)
    if extra_metrics := tuple(m for m in extra if m in cols):
        panels.append(metrics.Panel("More metrics", extra_metrics, "", ""))
    low, high = data.clip_bounds(info)
    x_title = series.X_MODES[x_mode]
    grid = st.columns(2)
    for i, panel in enumerate(panels):
        df = _lines(run, frame.version, panel.metrics, x_mode, smoothing, frame.df)
        spec = charts.line_chart(df, title=panel.title, help=panel.help, x_title=x_title, y_title=panel.y_title,
                                 smoothing=smoothing > 0, rules=[low, high] if panel.ratio else None,
                                 log_y=panel.ratio, stacked=panel.stacked)
        with grid[i % 2]:
            st.vega_lite_chart(spec=spec, key=f"live_chart_{i}")
    if (missing := not_logged(info)) is not None:
        st.caption(f"{missing[0]}: {missing[1]}.")
    histogram_section(run, low, high, missing is not None)
    st.caption(f"Read {frame.new_rows} new rows · {len(frame.df)} steps · updated {time.strftime('%H:%M:%S')}")


def histogram_section(run: str, low: float, high: float, foreign: bool = False) -> None:
    hist = data.histograms(run)
    if foreign and hist.df.empty:
        return  # another trainer's run: not_logged() has said so; no empty section, no warning
    st.subheader("Ratio histogram")
    ui.warn(hist.problems)
    if hist.df.empty:
        return
    left, right = st.columns([3, 2])
    with left:
        st.vega_lite_chart(spec=charts.ratio_heatmap(_heat(run, hist.version, hist.df), low, high), key="live_heat")
    with right:
        steps = hist.df["step"]
        step = st.number_input("Step (blank: latest)", min_value=1, value=None, step=1, key="live_hist_step")
        row = hist.df[steps == step] if step else hist.df.iloc[[-1]]
        if row.empty:
            st.caption(f"No histogram for step {step}; showing the latest.")
            row = hist.df.iloc[[-1]]
        row = row.iloc[0]
        st.vega_lite_chart(spec=charts.ratio_bars(series.histogram_bars(row), float(row["clip_low_bound"]),
                                                   float(row["clip_high_bound"]), int(row["step"])), key="live_bars")
        st.caption(f"{int(row['tokens'])} tokens; clipped low {int(row['clipped_low'])}, high {int(row['clipped_high'])}.")
