"""The Live page's body, run inside `st.fragment(run_every=...)` so only it refreshes."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from grpo_lab.dashboard import charts, data, metrics, series, ui
from grpo_lab.dashboard.i18n import t


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
    cols[0].metric(t("live.state"), ui.state_label(info.state))
    total = info.total_steps or 1
    cols[1].progress(min(info.step / total, 1.0),
                     text=t("live.progress", step=info.step, total=info.total_steps or "?"))
    reward = data.latest(frame, "reward/mean")
    cols[2].metric(t("live.latest_reward"), "—" if reward is None else f"{reward:.3f}")
    cols[3].metric(t("live.elapsed"), ui.duration(ui.run_duration(info)))
    if info.error:
        st.error(t("ui.error", error=info.error))


def doctor_banner(run: str, info) -> None:
    """The run doctor's findings (tables/events): the worst first, each with its step and likely fix."""
    found = data.events(run)
    if found.empty:
        return
    stop_reason = (info.status or {}).get("stop_reason")
    worst = "critical" if (found["severity"] == "critical").any() else "warning" if (
        found["severity"] == "warning").any() else "info"
    lines = [t("live.finding", icon=data.SEVERITY_ICONS.get(r.severity, ""), step=r.step, kind=r.kind,
               message=r.message, suggestion=r.suggestion)
             for r in found.sort_values("step", ascending=False).head(5).itertuples()]
    more = "\n\n" + t("live.earlier_findings", n=len(found) - 5) if len(found) > 5 else ""
    head = (t("live.stopped_by_doctor", reason=stop_reason) if stop_reason else t("live.doctor_found")) + "\n\n"
    {"critical": st.error, "warning": st.warning, "info": st.info}[worst](head + "\n".join(lines) + more)


def not_logged(info) -> tuple[str, str] | None:
    """(heading, what is missing) when the run comes from another trainer that does not log everything we do
    (config.json / status.json `source`, docs/trl-and-verl.md): said once instead of drawing empty charts."""
    source = str(info.get("source") or "")
    if source == "trl":
        return t("live.trl_head"), t("live.trl_missing")
    if source == "verl":
        return t("live.verl_head"), t("live.verl_missing")
    return None


def render(run: str, x_mode: str, smoothing: float, extra: list[str], was_active: bool) -> None:
    info = data.run(run)
    if was_active and info.state not in data.ACTIVE_STATES:
        st.rerun(scope="app")  # the run ended: redraw the page once more, without the timer
    frame = data.scalars(run)
    header(info, frame)
    doctor_banner(run, info)
    ui.warn(info.problems + frame.problems)
    if frame.df.empty:
        st.info(t("live.no_steps"))
        return
    cols = list(frame.df.columns)
    panels = metrics.panels(cols)
    if extra_metrics := tuple(m for m in extra if m in cols):
        panels.append(metrics.Panel(t("live.more_metrics"), extra_metrics, "", ""))
    low, high = data.clip_bounds(info)
    x_title = ui.x_title(x_mode)
    grid = st.columns(2)
    for i, panel in enumerate(panels):
        df = _lines(run, frame.version, panel.metrics, x_mode, smoothing, frame.df)
        spec = charts.line_chart(df, title=panel.title, help=panel.help, x_title=x_title, y_title=panel.y_title,
                                 smoothing=smoothing > 0, rules=[low, high] if panel.ratio else None,
                                 log_y=panel.ratio, stacked=panel.stacked, x_steps=x_mode == "step")
        with grid[i % 2]:
            st.vega_lite_chart(spec=spec, key=f"live_chart_{i}")
    if (missing := not_logged(info)) is not None:
        st.caption(t("live.not_logged", head=missing[0], what=missing[1]))
    histogram_section(run, low, high, missing is not None)
    st.caption(t("live.read", rows=frame.new_rows, steps=len(frame.df), time=time.strftime("%H:%M:%S")))


def histogram_section(run: str, low: float, high: float, foreign: bool = False) -> None:
    hist = data.histograms(run)
    if foreign and hist.df.empty:
        return  # another trainer's run: not_logged() has said so; no empty section, no warning
    st.subheader(t("live.histogram"))
    ui.warn(hist.problems)
    if hist.df.empty:
        return
    left, right = st.columns([3, 2])
    with left:
        st.vega_lite_chart(spec=charts.ratio_heatmap(_heat(run, hist.version, hist.df), low, high), key="live_heat")
    with right:
        steps = hist.df["step"]
        step = st.number_input(t("live.hist_step"), min_value=1, value=None, step=1, key="live_hist_step")
        row = hist.df[steps == step] if step else hist.df.iloc[[-1]]
        if row.empty:
            st.caption(t("live.no_hist", step=step))
            row = hist.df.iloc[[-1]]
        row = row.iloc[0]
        st.vega_lite_chart(spec=charts.ratio_bars(series.histogram_bars(row), float(row["clip_low_bound"]),
                                                   float(row["clip_high_bound"]), int(row["step"])), key="live_bars")
        st.caption(t("live.hist_counts", tokens=int(row["tokens"]), low=int(row["clipped_low"]),
                     high=int(row["clipped_high"])))
