"""The Live page's body, run inside `st.fragment(run_every=...)` so only it refreshes.

First paint is the header and the overview charts (metrics.SECTIONS); every other section, and the
ratio histogram, waits in a closed expander and is read and drawn only once opened: each Vega chart
costs the browser ~0.1-0.2 s to compile and draw, and fifteen of them took a 10,000-step run 2-3 s.
A refresh re-sends the open charts; the browser redraws only those whose data changed.
"""

from __future__ import annotations

import functools
import time

import pandas as pd
import streamlit as st

from grpo_lab.dashboard import markup, pages, ui
from grpo_lab.dashboard.reading import data, downsample, queries
from grpo_lab.dashboard.views import charts, metrics, series
from grpo_lab.dashboard.views.groups import groups_order, rating
from grpo_lab.dashboard.views.live import curve_link, honesty_section, loss_note
from grpo_lab.dashboard.i18n import t
from grpo_lab.rundir import group_order
from grpo_lab.rundir import reader
from grpo_lab.rundir.reader import run_path, table_parts


@st.cache_resource(max_entries=512, show_spinner=False)
def _lines(run: str, version: tuple, panel: tuple[str, ...], x_mode: str, smoothing: float,
           _df) -> tuple[pd.DataFrame, series.Picks]:
    return series.long_frame(_df, list(panel), x_mode, smoothing), series.picks(_df, list(panel), x_mode, smoothing)


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
    phase = info.get("phase") if info.state == "starting" else None  # the warm start: its own bar
    if isinstance(phase, dict) and isinstance(phase.get("total"), int) and phase["total"] > 0:
        cols[1].progress(min(max(int(phase.get("done") or 0), 0) / phase["total"], 1.0), text=ui.activity(info))
    else:
        cols[1].progress(min(info.step / total, 1.0),
                         text=t("live.progress", step=info.step, total=info.total_steps or "?")
                         + (f" · {doing}" if (doing := ui.activity(info)) else ""))
    reward = data.latest(frame, "reward/mean")
    cols[2].metric(t("live.latest_reward"), "—" if reward is None else f"{reward:.3f}")
    cols[3].metric(t("live.elapsed"), ui.duration(ui.run_duration(info)))
    if (world := ui.world_label(info)) != "—":
        st.caption(t("live.world", world=world))
    if info.error:
        st.error(t("ui.error", error=markup.md(info.error)))  # run text: never markup


def doctor_banner(run: str, info) -> None:
    """The run doctor's findings (tables/events): the worst first, each with its step and likely fix."""
    found = data.events(run)
    if found.empty:
        return
    stop_reason = (info.status or {}).get("stop_reason")
    worst = "critical" if (found["severity"] == "critical").any() else "warning" if (
        found["severity"] == "warning").any() else "info"
    shown = list(found.sort_values("step", ascending=False).head(5).itertuples())
    lines = [t("live.finding", icon=data.SEVERITY_ICONS.get(r.severity, ""), step=r.step, kind=markup.md(r.kind),
               message=markup.md(r.message), suggestion=markup.md(r.suggestion))  # run text: never markup
             for r in shown]
    more = "\n\n" + t("live.earlier_findings", n=len(found) - 5) if len(found) > 5 else ""
    head = (t("live.stopped_by_doctor", reason=markup.md(stop_reason)) if stop_reason
            else t("live.doctor_found")) + "\n\n"
    {"critical": st.error, "warning": st.warning, "info": st.info}[worst](head + "\n".join(lines) + more)
    finding_links(run, shown)


def finding_links(run: str, findings: list) -> None:
    """Under the banner, each finding's way to its cause: Groups at its step, in the ordering of its metric."""
    names = groups_order.sort_names()
    for r in findings:
        params = curve_link.finding_address(run, int(r.step), str(r.kind))
        order = names[params["sort"]] if "sort" in params else names[group_order.GROUP]
        st.page_link(pages.path("groups"), label=t("curve.finding_link", step=int(r.step), kind=str(r.kind),
                                                    order=order), icon=pages.icon("groups"), query_params=params)


def not_logged(info) -> tuple[str, str] | None:
    """(heading, what is missing) when the run comes from another trainer that does not log everything we do
    (config.json / status.json `source`, docs/trl-and-verl.md): said once instead of drawing empty charts."""
    source = str(info.get("source") or "")
    if source == "trl":
        return t("live.trl_head"), t("live.trl_missing")
    if source == "verl":
        return t("live.verl_head"), t("live.verl_missing")
    return None


def section_names() -> dict[str, str]:
    """metrics.SECTIONS (but the overview, which has no heading) in the current language."""
    return {section: t(f"live.section.{section}") for section in metrics.SECTIONS[1:]}


HISTOGRAM = "histogram"  # the ratio histogram's expander, after metrics.SECTIONS
BY_POSITION = "mismatch_by_position"  # the sampler's gap by token position, after the histogram
POSITION_STEPS = 10  # the last steps the by-position view averages over


def open_key(section: str) -> str:
    """The session_state key of a closed section's expander (metrics.SECTIONS or HISTOGRAM): True while open."""
    return f"live_open_{section}"


def lazy_expander(label: str, key: str):
    """A closed expander whose body runs only while it is open (its `.open`; inside the fragment,
    opening it reruns only the fragment). Returns the container, or None while it is closed."""
    box = st.expander(label, key=key, on_change="rerun")
    return box if box.open else None


def draw_panels(panels: list[tuple[int, metrics.Panel]], *, run: str, frame: data.Frame, x_mode: str,
                smoothing: float, bounds: tuple[float, float]) -> None:
    """Numbered panels as line charts, two a row (chart i keyed live_chart_i). A click on a curve opens
    Groups at the step picked, its groups ordered by the panel's metric (curve_link)."""
    grid = st.columns(2) if panels else []
    for place, (i, panel) in enumerate(panels):
        df, picks = _lines(run, frame.version, panel.metrics, x_mode, smoothing, frame.df)
        style = charts.LineStyle(smoothing=smoothing > 0, rules=bounds if panel.ratio else (), log_y=panel.ratio,
                                 stacked=panel.stacked)
        spec = charts.line_chart(df, title=panel.title, help=panel.help, x_title=ui.x_title(x_mode),
                                 y_title=panel.y_title, x_steps=x_mode == "step", style=style, picks=picks)
        with grid[place % 2]:
            state = st.vega_lite_chart(spec=spec, key=f"live_chart_{i}", on_select="rerun",
                                       selection_mode=charts.PICK)
            if "loss/policy" in panel.metrics:
                loss_note.show(run, frame)
        picked = charts.picked_x(state.selection if state is not None else None)
        if picked is not None:
            st.switch_page(pages.path("groups"),
                           query_params=curve_link.address(run, curve_link.step_at(frame.df, x_mode, picked),
                                                           panel.metrics))


def render(run: str, x_mode: str, smoothing: float, extra: list[str], was_active: bool) -> None:
    info = data.run(run)
    if was_active and info.state not in data.ACTIVE_STATES:
        st.rerun(scope="app")  # the run ended: redraw the page once more, without the timer
    if st.session_state.get(ui.PICKER_STATE, (run, info.state)) != (run, info.state):
        st.rerun(scope="app")  # starting -> running: the picker above says what State says
    frame = data.scalars(run)
    header(info, frame)
    doctor_banner(run, info)
    rating.waiting_notice(info)  # the `human` reward: the trainer waits for a person's ratings
    early = frame.df.empty and info.state in data.ACTIVE_STATES  # warming up or waiting: no table yet is normal
    ui.warn(info.problems + [p for p in frame.problems if not (early and reader.not_yet(p))])
    if frame.df.empty:
        st.info(t("live.no_steps"))
        return
    cols = list(frame.df.columns)
    panels = metrics.panels(cols)
    if extra_metrics := tuple(m for m in extra if m in cols):  # asked for: drawn with the overview
        panels.append(metrics.Panel(t("live.more_metrics"), extra_metrics, "", ""))
    low, high = data.settings(info).clip_bounds
    numbered = list(enumerate(panels))  # chart keys by place in the whole list: stable while sections open and close
    draw = functools.partial(draw_panels, run=run, frame=frame, x_mode=x_mode, smoothing=smoothing, bounds=(low, high))
    draw([(i, p) for i, p in numbered if p.section == "overview"])
    no_gap = sampler_gap(frame.df)
    for section, name in section_names().items():
        inside = [(i, p) for i, p in numbered if p.section == section]
        if section == honesty_section.SECTION:  # is the reward honest? (recomputed for runs that lack it)
            honesty_section.show(run, info, frame, inside, lambda label: lazy_expander(label, open_key(section)), draw)
            continue
        if not inside:
            continue
        if section == "sampler" and no_gap is not None:  # charts of 1e-6 noise would read as a finding
            st.caption(t("live.sampler_no_gap", name=name, gap=f"{no_gap:.1g}"))
            continue
        label = t("live.section", name=name, panels=" · ".join(p.title for _, p in inside))
        if (box := lazy_expander(label, open_key(section))) is not None:
            with box:
                draw(inside)
    if (missing := not_logged(info)) is not None:
        st.caption(t("live.not_logged", head=missing[0], what=missing[1]))
    histogram_section(run, low, high, missing is not None)
    if no_gap is None:
        mismatch_section(run)
    st.caption(t("live.read", rows=frame.new_rows, steps=len(frame.df), time=time.strftime("%H:%M:%S")))
    if (stride := downsample.bucket_size(len(frame.df))) > 1:  # downsampled (downsample.minmax_indices): said so
        st.caption(t("live.downsampled", stride=stride, points=downsample.MAX_POINTS))


NO_GAP = 1e-3  # |log pi_old - log pi_sampler| below this on every step: float round-off, not two models


def sampler_gap(df: pd.DataFrame) -> float | None:
    """The run's largest |log w| when its sampler is its trainer (every step's mismatch/logp_diff_max
    under NO_GAP, no token outside [0.9, 1.1]): the gap is round-off. None when there is a gap, or
    nothing was logged to tell.

    >>> sampler_gap(pd.DataFrame({"mismatch/logp_diff_max": [2e-6, 4e-6], "mismatch/out_frac": [0.0, 0.0]}))
    4e-06
    >>> sampler_gap(pd.DataFrame({"mismatch/logp_diff_max": [2e-6, 0.3], "mismatch/out_frac": [0.0, 0.1]}))
    """
    diff = df.get("mismatch/logp_diff_max")
    if diff is None or diff.dropna().empty:
        return None
    out = df.get("mismatch/out_frac", pd.Series([0.0]))
    gap = float(diff.max())
    return gap if gap < NO_GAP and float(out.fillna(0).max()) == 0 else None


def histogram_section(run: str, low: float, high: float, foreign: bool = False) -> None:
    """The ratio histogram (a heatmap over steps, one step's bars) in a closed expander: its table
    (a list of counts a step) is read only once the expander is opened."""
    parts, problems = table_parts(run_path(data.runs_dir(), run), "histograms")
    if not parts:  # no expander to open onto nothing; another trainer's run: not_logged() has said so
        ui.warn([] if foreign else problems)
        return
    if (box := lazy_expander(t("live.histogram"), open_key(HISTOGRAM))) is None:
        return
    hist = data.histograms(run)
    with box:
        ui.warn(hist.problems)
    if hist.df.empty:
        return
    left, right = box.columns([3, 2])
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


def mismatch_section(run: str) -> None:
    """Where in a completion the sampler and the trainer disagree: mean |log pi_old - log pi_sampler| and
    the share of tokens with w outside [0.9, 1.1], by token position over the last POSITION_STEPS steps
    (the tokens table's kept groups). Only for runs whose tokens table has the sampler's log-probs; read
    only once its expander is opened."""
    if not queries.has_token_column(run, "logp_sampler"):
        return
    if (box := lazy_expander(t("live.mismatch_position"), open_key(BY_POSITION))) is None:
        return
    frame, problems = queries.mismatch_by_position(run, POSITION_STEPS)
    with box:
        ui.warn(problems)
        if frame.empty:
            st.caption(t("live.mismatch_none"))
            return
        st.caption(t("live.mismatch_position_help", steps=POSITION_STEPS))
        st.line_chart(frame.set_index("position")[["logp_diff_mean", "out_frac"]], height=220)
