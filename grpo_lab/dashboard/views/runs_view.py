"""The Runs page's body: the runs table, and what can be done with the selected run."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from grpo_lab.dashboard import ui
from grpo_lab.dashboard.launching import launch_form, launcher
from grpo_lab.dashboard.reading import data
from grpo_lab.dashboard.views import markup, sweeps_view
from grpo_lab.dashboard.i18n import t
from grpo_lab.rundir.layout import SOURCES_KEY
from grpo_lab.rundir.reader import tail


def runs_frame(runs, pending) -> pd.DataFrame:
    rows = []
    for r in runs:
        latest = data.latest(data.scalars(r.name), "reward/mean") if r.status else None
        started = r.started_at
        rows.append({
            "name": r.name, "algo": r.get("algo", "—"), "model": r.get("model", "—"), "task": r.get("task", "—"),
            "state": ui.state_label(r.state),
            "progress": min(r.step / r.total_steps, 1.0) if r.total_steps > 0 else 0.0,
            "step": f"{r.step} / {r.total_steps or '?'}",
            "latest reward": latest,
            "doctor": data.findings_badge(r),
            "processes": ui.world_label(r),
            "started": pd.to_datetime(started, unit="s", utc=True).tz_convert(None) if started else None,
            "duration": ui.duration(ui.run_duration(r)),
        })
    for p in pending:
        rows.append({"name": p.name, "algo": "—", "model": "—", "task": "—",
                     "state": ui.state_label("queued" if p.queued else "launching" if p.alive else "failed to start"), "progress": 0.0,
                     "step": "—", "latest reward": None, "doctor": "", "processes": "—",
                     "started": pd.to_datetime(p.started_at, unit="s", utc=True).tz_convert(None), "duration": "—"})
    return pd.DataFrame(rows)


def act(action: str, name: str) -> None:
    """Button callback (runs before the script, so a click is never lost to a refresh)."""
    try:
        if action == "stop":
            pid = launcher.stop(data.runs_dir(), name)
            message = t("runs.stop_asked", name=name, pid=pid)
        elif action == "resume":
            launcher.resume(data.runs_dir(), name)
            message = t("runs.resuming", name=name)
        else:
            launcher.dismiss(data.runs_dir(), name)
            message = t("runs.dismissed", name=name)
        st.session_state["runs_message"] = ("success", message)
    except (launcher.LaunchError, ValueError) as exc:
        st.session_state["runs_message"] = ("error", str(exc))
    st.session_state["runs_full_rerun"] = True  # the auto-refresh may need to start or stop


def actions(name: str, runs, pending) -> None:
    """What can be done with the selected run: open it, stop it, resume it, read its log."""
    info = next((r for r in runs if r.name == name), None)
    pend = next((p for p in pending if p.name == name), None)
    cols = st.columns(5)
    if info is not None:
        cols[0].page_link("app_pages/live.py", label=t("nav.live"), icon="📈", query_params={"run": name},
                          width="stretch")
        cols[1].page_link("app_pages/groups.py", label=t("nav.groups"), icon="👥", query_params={"run": name},
                          width="stretch")
        cols[2].page_link("app_pages/compare.py", label=t("nav.compare"), icon="⚖️", query_params={"runs": name},
                          width="stretch")
    state = info.state if info else ("queued" if pend and pend.queued else
                                     "launching" if pend and pend.alive else "failed to start")
    if state in data.ACTIVE_STATES or state == "launching":
        cols[3].button(t("runs.stop"), key="stop", type="primary", width="stretch", on_click=act, args=("stop", name))
    elif state in ("stopped", "failed") and info is not None and info.config and not info.get("source"):
        # (a TRL or verl run is resumed by its own trainer, not this one)
        cols[3].button(t("runs.resume"), key="resume", type="primary", width="stretch", on_click=act,
                       args=("resume", name))
    if pend is not None and not pend.alive:
        cols[4].button(t("runs.dismiss"), key="dismiss", help=t("runs.dismiss_help"), width="stretch",
                       on_click=act, args=("dismiss", name))
    kind, message = st.session_state.pop("runs_message", (None, None))
    if message:
        (st.success if kind == "success" else st.error)(markup.md(message))  # may quote a run's text
    if info is not None:
        ui.warn(info.problems)
        if info.error:
            st.error(t("ui.error", error=markup.md(info.error)))
        if info.config:
            with st.expander(t("runs.options")):
                options = options_table(info.config)
                st.dataframe(options, hide_index=True, column_config=ui.column_config(options.columns))
        st.text(t("runs.log"))
        st.code(tail(info.path / "train.log") or t("runs.empty_log"), language=None)
    output = launcher.launch_log(data.runs_dir(), name)
    if output:
        with st.expander(t("runs.trainer_output"), expanded=info is None):
            st.code(output, language=None)


def options_table(config: dict) -> pd.DataFrame:
    """One row per option: its effective value and its source (config.json's `sources`)."""
    sources = config.get(SOURCES_KEY) if isinstance(config.get(SOURCES_KEY), dict) else {}
    rows = [{"option": k, "value": json.dumps(v) if isinstance(v, (dict, list)) else str(v),
             "source": sources.get(k, "—")} for k, v in config.items() if k != SOURCES_KEY]
    return pd.DataFrame(rows)


def any_active(runs, pending) -> bool:
    return any(r.state in data.ACTIVE_STATES for r in runs) or any(p.alive or p.queued for p in pending)


def render(was_active: bool) -> None:
    """The runs table and the selected run's actions; a fragment refreshed while runs are active."""
    if launcher.start_queued(data.runs_dir()):  # a slot came free: the next queued launch starts
        st.session_state["runs_full_rerun"] = True
    runs = data.runs()
    pending = launcher.pending(data.runs_dir(), {r.name for r in runs})
    if st.session_state.pop("runs_full_rerun", False) or (was_active and not any_active(runs, pending)):
        st.rerun(scope="app")  # a run started or ended: redraw with (or without) the timer
    if not runs and not pending:
        st.info(t("runs.no_runs"))
        if st.button(t("runs.launch_demo"), type="primary", key="launch_demo"):
            launch_form.start(launch_form.demo_values(data.runs_dir()))
        return
    sweeps_view.render(runs, pending, data.runs_dir())  # each sweep one collapsed row with its progress
    left, right = st.columns([2, 1])
    text = left.text_input(t("runs.filter"), key="runs_filter", placeholder=t("runs.filter_placeholder"))
    frame = runs_frame(runs, pending)
    states = sorted(frame["state"].unique())
    chosen = right.multiselect(t("runs.state"), states, key="runs_states", placeholder=t("runs.state_placeholder"))
    shown = frame[frame["name"].str.contains(text, case=False, regex=False)] if text else frame
    if chosen:
        shown = shown[shown["state"].isin(chosen)]
    st.dataframe(shown, hide_index=True, key="runs_table", on_select="rerun", selection_mode="single-row",
                 column_config={
                     **ui.column_config(shown.columns, formats={"latest reward": "%.3f"}),
                     "progress": st.column_config.ProgressColumn(t("col.progress"), min_value=0.0, max_value=1.0,
                                                                 format="percent"),
                     "started": st.column_config.DatetimeColumn(t("col.started"), format="YYYY-MM-DD HH:mm:ss"),
                 })
    names = shown["name"].tolist()
    if not names:
        st.caption(t("runs.no_match"))
        return
    picked = st.session_state.get("runs_table", {}).get("selection", {}).get("rows", [])
    if picked and picked[0] < len(names) and picked != st.session_state.get("runs_table_applied"):
        st.session_state["runs_pick"] = names[picked[0]]  # a new click in the table
    st.session_state["runs_table_applied"] = picked
    if st.session_state.get("runs_pick_next") in names:  # just launched from the form
        st.session_state["runs_pick"] = st.session_state.pop("runs_pick_next")
    if st.session_state.get("runs_pick") not in names:
        wanted = st.session_state.get(ui.SELECTED)
        st.session_state["runs_pick"] = wanted if wanted in names else names[0]
    st.subheader(t("runs.selected"))
    name = st.selectbox(t("run.pick"), names, key="runs_pick", label_visibility="collapsed")
    actions(name, runs, pending)
