"""The Runs page's body: the list, archive or trash; the runs table with its filters and pages
(views/runs/runs_filters.py); and what can be done with the selected run (open, stop, resume, tag, archive, delete)."""

from __future__ import annotations

import json
import math
import os
import time

import pandas as pd
import streamlit as st

from grpo_lab.dashboard import fork_form, launch_form, markup, pages, ui
from grpo_lab.launching import form_checks, housekeeping, launch_queue, launch_records, pending_launches, process_control
from grpo_lab.launching.keys import KeyDirError, check_key_dir
from grpo_lab.dashboard.reading import data
from grpo_lab.dashboard.views.runs import annotations_view, runs_filters, runs_manage_view, sweeps_view
from grpo_lab.dashboard.i18n import per_language, t
from grpo_lab.rundir.layout import SOURCES_KEY
from grpo_lab.rundir.reader import tail


FILTERED = ["name", "algo", "state", "sweep", "tags"]  # what the filters read, for every run
SHOWN = ["name", "algo", "model", "task", "state", "tags", "progress", "step", "latest reward", "doctor", "processes",
         "started", "duration"]  # what the table shows, for the rows of one page


def meta_frame(listing, pending) -> pd.DataFrame:
    """One row per run (data.listing's) and pending launch with what the filters read: raw `state`,
    `algo`, `sweep`, `tags` (a tuple). Nothing here opens a file or loops over the runs: the
    listing's table is made once per listing; what the table shows is made for one page (shown_frame)."""
    table = listing.table
    runs = table[FILTERED].assign(algo=table["algo"].fillna("—"), sweep=table["sweep"].fillna(""))
    if not pending:
        return runs
    launches = pd.DataFrame({"name": [p.name for p in pending], "algo": [p.planned.algo or "—" for p in pending],
                             "state": [sweeps_view.launch_state(p) for p in pending],
                             "sweep": [p.planned.sweep for p in pending], "tags": [()] * len(pending)},
                            columns=FILTERED)
    return pd.concat([runs, launches], ignore_index=True) if len(runs) else launches


def _started(seconds) -> str:
    """A start time as the table shows it (UTC, to the second), "—" when there is none."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) if seconds else "—"


def _run_row(r, tags: tuple[str, ...]) -> dict:
    """A run as the table shows it: state as a label (+ waiting for ratings), tags as text, the
    latest reward read from its table."""
    reward = data.latest(data.scalars(r.name), "reward/mean") if r.status else None
    return {"name": r.name, "algo": str(r.get("algo", "—")), "model": r.get("model", "—"), "task": r.get("task", "—"),
            "state": ui.run_state_label(r), "tags": " ".join(tags),
            # whole percents: "92%", as the sweeps' rows say it (not "91.67%")
            "progress": round(100 * min(r.step / r.total_steps, 1.0)) if r.total_steps > 0 else 0,
            "step": f"{r.step} / {r.total_steps or '?'}",
            # text, "—" where there is none: the table would print a missing number as "None", in any language
            "latest reward": f"{reward:.3f}" if reward is not None and math.isfinite(reward) else "—",
            "doctor": data.findings_badge(r), "processes": ui.world_label(r), "started": _started(r.started_at),
            "duration": ui.duration(ui.run_duration(r))}


def _launch_row(p) -> dict:
    """A launch with no run folder yet, as the table shows it: what its record plans (pending_launches.planned:
    the trainer's checks), "—" where it plans nothing that passes them."""
    plan, state = p.planned, sweeps_view.launch_state(p)
    total = plan.total_steps if plan.checked else 0
    step = t("runs.step_queued", total=total) if total and state in ("queued", "queued elsewhere") else \
        f"0 / {total}" if total else "—"
    return {"name": p.name, "algo": plan.algo or "—", "model": plan.model or "—", "task": plan.task or "—",
            "state": ui.state_label(state), "tags": "", "progress": 0, "step": step, "latest reward": "—",
            "doctor": "", "processes": "—", "started": _started(p.started_at), "duration": "—"}


def shown_frame(rows: pd.DataFrame, runs, pending, tags) -> pd.DataFrame:
    """The rows of one page (meta_frame's) as the table shows them; only these rows' tables are read."""
    listed = {r.name: r for r in runs}
    launches = {p.name: p for p in pending}
    return pd.DataFrame([_run_row(listed[n], tags.get(n, ())) if n in listed else _launch_row(launches[n])
                         for n in rows["name"]], columns=SHOWN)


def act(action: str, name: str) -> None:
    """Button callback (runs before the script, so a click is never lost to a refresh)."""
    try:
        if action == "stop":
            pid = process_control.stop(data.runs_dir(), name)
            message = t("runs.stop_asked", name=name, pid=pid)
        elif action == "resume":
            process_control.resume(data.runs_dir(), name)
            message = t("runs.resuming", name=name)
        elif action == "queue_here":  # checked again as the launch form's values, then signed here
            launch_queue.queue_here(data.runs_dir(), name)
            message = t("runs.queued_here", name=name)
        else:
            process_control.dismiss(data.runs_dir(), name)
            message = t("runs.dismissed", name=name)
        st.session_state["runs_message"] = ("success", message)
    except (form_checks.LaunchError, ValueError) as exc:
        st.session_state["runs_message"] = ("error", str(exc))
    st.session_state["runs_full_rerun"] = True  # the auto-refresh may need to start or stop


def actions(name: str, runs, pending) -> None:
    """What can be done with the selected run: open it, stop it, resume it, read its log."""
    info = next((r for r in runs if r.name == name), None)
    pend = next((p for p in pending if p.name == name), None)
    cols = st.columns(7)
    if info is not None:
        for col, page, params in ((cols[0], "live", {"run": name}), (cols[1], "groups", {"run": name}),
                                  (cols[2], "compare", {"runs": name})):
            col.page_link(pages.path(page), label=t(pages.PAGES[page].title), icon=pages.icon(page),
                          query_params=params, width="stretch")
    if info is None and pend is not None:  # just started: its Live says it waits, then shows the run
        cols[0].page_link(pages.path("live"), label=t(pages.PAGES["live"].title), icon=pages.icon("live"),
                          query_params={"run": name}, width="stretch")
    state = info.state if info else sweeps_view.launch_state(pend)
    if state in data.ACTIVE_STATES or state == "launching":
        cols[3].button(t("runs.stop"), key="stop", type="primary", width="stretch", on_click=act, args=("stop", name))
    elif state in ("stopped", "failed") and info is not None and info.config and not info.get("source"):
        # (a TRL or verl run is resumed by its own trainer, not this one)
        cols[3].button(t("runs.resume"), key="resume", type="primary", width="stretch", on_click=act,
                       args=("resume", name))
    elif state == "queued elsewhere":  # never refused for good unsaid: why, and the ways out
        st.warning(t("runs.queued_elsewhere", name=markup.md(name)))
        cols[3].button(t("runs.queue_here"), key="queue_here", help=t("runs.queue_here_help"), width="stretch",
                       on_click=act, args=("queue_here", name))
    if info is not None and state not in data.ACTIVE_STATES and state != "launching":
        runs_manage_view.buttons(name, cols[5:])
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
        with st.expander(t("annotations.heading"), expanded=False):
            annotations_view.editor(info)
        fork_form.family(info)  # the run it was forked from, and its forks
        fork_form.panel(info, "runs")  # "Fork from step S": the steps its checkpoints allow
        if info.config:
            with st.expander(t("runs.options")):
                options = options_table(info.config)
                st.dataframe(options, hide_index=True, column_config=ui.column_config(options.columns))
        st.text(t("runs.log"))
        st.code(tail(info.path / "train.log") or t("runs.empty_log"), language=None)
    output = launch_records.launch_log(data.runs_dir(), name)
    if output:
        with st.expander(t("runs.trainer_output"), expanded=info is None):
            st.code(output, language=None)


def options_table(config: dict) -> pd.DataFrame:
    """One row per option: its effective value and its source (config.json's `sources`)."""
    sources = config.get(SOURCES_KEY) if isinstance(config.get(SOURCES_KEY), dict) else {}
    rows = [{"option": k, "value": json.dumps(v) if isinstance(v, (dict, list)) else str(v),
             "source": sources.get(k, "—")} for k, v in config.items() if k != SOURCES_KEY]
    return pd.DataFrame(rows)


def view_switch(any_runs: bool) -> str:
    """The list, the archive or the trash (each with how many runs it holds); only the list while
    there is nothing anywhere, so a first visit sees the demo offer alone."""
    counts = {v: len(housekeeping.held(data.runs_dir(), v)) for v in ("archive", "trash")}
    if not any_runs and not any(counts.values()):
        return "list"
    names = {"list": t("runs.view_list"), "archive": t("runs.view_archive", n=counts["archive"]),
             "trash": t("runs.view_trash", n=counts["trash"])}
    return st.segmented_control(t("runs.view"), list(names), default="list", format_func=names.get, key="runs_view",
                                required=True, label_visibility="collapsed") or "list"


def _multiselect(column, label: str, options: list[str], key: str, **kwargs) -> tuple[str, ...]:
    """A filter multiselect whose remembered picks that no longer exist (a tag removed) are dropped first."""
    if key in st.session_state:
        st.session_state[key] = [v for v in st.session_state[key] if v in options]
    return tuple(column.multiselect(label, options, key=key, **kwargs))


def filter_widgets(frame: pd.DataFrame) -> runs_filters.Filters:
    """Name, state and algorithm always; sweep and tags once some run has one."""
    found = runs_filters.choices(frame)
    wide = [2, 1, 1] + [1] * bool(found["sweeps"]) + [1] * bool(found["tags"])
    cols = st.columns(wide)
    text = cols[0].text_input(t("runs.filter"), key="runs_filter", placeholder=t("runs.filter_placeholder"))
    states = _multiselect(cols[1], t("runs.state"), list(runs_filters.STATES), per_language("runs_states"),
                          format_func=ui.state_label, placeholder=t("runs.state_placeholder"))
    algos = _multiselect(cols[2], t("runs.filter_algo"), found["algos"], "runs_algos",
                         placeholder=t("runs.filter_algo_placeholder"))
    more = iter(cols[3:])
    sweeps = _multiselect(next(more), t("runs.filter_sweep"), found["sweeps"], "runs_sweeps",
                          placeholder=t("runs.filter_sweep_placeholder")) if found["sweeps"] else ()
    tags = _multiselect(next(more), t("runs.filter_tags"), found["tags"], "runs_tags", help=t("runs.filter_tags_help"),
                        placeholder=t("runs.filter_tags_placeholder")) if found["tags"] else ()
    return runs_filters.Filters(text=text, sweeps=sweeps, tags=tags, states=states, algos=algos)


def page_widget(matching: int, total: int) -> int:
    """Which page of the matching runs to show; a page picker only when they fill more than one."""
    count = runs_filters.pages(matching)
    number = 1
    if count > 1:
        if st.session_state.get("runs_page", 1) > count:  # the filter shrank the list
            st.session_state["runs_page"] = count
        left, right = st.columns([1, 3], vertical_alignment="bottom")
        number = int(left.number_input(t("runs.page", n=count), min_value=1, max_value=count, step=1, key="runs_page"))
    first = (number - 1) * runs_filters.PAGE_SIZE + 1 if matching else 0
    last = min(number * runs_filters.PAGE_SIZE, matching)
    if matching:  # none: the page says "no run matches" below
        (right if count > 1 else st).caption(t("runs.showing", first=first, last=last, matching=matching, total=total))
    return number


WATCH_S = 3.0  # how often a Runs page with nothing active looks for runs started elsewhere


def mark(listing) -> tuple:
    """What a Runs page with nothing active watches: the listing's version (a run added, removed or
    changed: the shared index looks at the folder at most once a second) and the launch queue
    folder's identity (an entry queued, refused or dismissed: its mtime, one stat)."""
    try:
        st_ = os.stat(data.runs_dir() / launch_records.LAUNCH_DIR)
        queue = (st_.st_ino, st_.st_mtime_ns, st_.st_nlink, st_.st_size)
    except OSError:
        queue = None
    return listing.version, queue


def watch(seen: tuple) -> None:
    """The timer of a Runs page with nothing active (a fragment that draws nothing): the whole page
    again once the runs folder or the queue changed since `seen` (mark's), so a run started from the
    command line, or by another dashboard, shows within seconds without a click."""
    if mark(data.listing()) != seen:
        st.rerun(scope="app")


def any_active(listing, pending) -> bool:
    """Whether a run of `listing` (data.listing's) trains, or a launch starts or waits: the page refreshes then."""
    return bool(listing.active) or any(p.alive or p.queued for p in pending)


def render(was_active: bool) -> None:
    """The runs table and the selected run's actions; a fragment refreshed while runs are active."""
    try:
        check_key_dir(data.runs_dir())
        if launch_queue.start_queued(data.runs_dir()):  # a slot came free: the next queued launch starts
            st.session_state["runs_full_rerun"] = True
    except KeyDirError as exc:  # the queue waits; the runs are still listed
        st.error(markup.md(str(exc)))
    listing = data.listing()
    runs = list(listing.runs)
    pending = pending_launches.pending(data.runs_dir(), {r.name for r in runs})
    if st.session_state.pop("runs_full_rerun", False) or (was_active and not any_active(listing, pending)):
        st.rerun(scope="app")  # a run started or ended: redraw with (or without) the timer
    view = view_switch(bool(runs or pending))
    if view == "archive":
        return runs_manage_view.archive_panel()
    if view == "trash":
        return runs_manage_view.trash_panel()
    if not runs and not pending:
        runs_manage_view.show_message()  # e.g. the last run was just deleted
        st.info(t("runs.no_runs"))
        if st.button(t("runs.launch_demo"), type="primary", key="launch_demo"):
            launch_form.start(launch_form.demo_values(data.runs_dir()))
        return
    in_sweeps = [r for r, sweep in zip(runs, listing.table["sweep"].notna()) if sweep]
    sweeps_view.render(in_sweeps, pending, data.runs_dir())  # each sweep one collapsed row with its progress
    frame = meta_frame(listing, pending)
    matching = runs_filters.apply(frame, filter_widgets(frame))
    shown = shown_frame(runs_filters.page(matching, page_widget(len(matching), len(frame))), runs, pending,
                        listing.tags)
    st.dataframe(shown, hide_index=True, key="runs_table", on_select="rerun", selection_mode="single-row",
                 column_config={
                     **ui.column_config(shown.columns, labels={"tags": t("col.tags")}),
                     "progress": st.column_config.ProgressColumn(t("col.progress"), min_value=0, max_value=100,
                                                                 format="%d%%"),
                 })
    names = shown["name"].tolist()  # the table's rows: a click picks one of them
    if not names:
        st.caption(t("runs.no_match"))
        return
    linked = st.query_params.get("run")  # a link to /?run=NAME opens on that run, as Live and Groups do
    if linked in matching["name"].tolist():
        st.session_state["runs_pick"] = linked  # the address is the truth: a pick writes it first
    picked = st.session_state.get("runs_table", {}).get("selection", {}).get("rows", [])
    if picked and picked[0] < len(names) and picked != st.session_state.get("runs_table_applied"):
        st.session_state["runs_pick"] = names[picked[0]]  # a new click in the table
    st.session_state["runs_table_applied"] = picked
    names = matching["name"].tolist()  # the picker offers every match, also those on other pages
    if st.session_state.get("runs_pick_next") in names:  # just launched from the form
        st.session_state["runs_pick"] = st.session_state.pop("runs_pick_next")
    if st.session_state.get("runs_pick") not in names:
        wanted = st.session_state.get(ui.SELECTED)
        st.session_state["runs_pick"] = wanted if wanted in names else names[0]
    st.subheader(t("runs.selected"))
    follow = "run" in st.query_params  # opened by a link: the address follows the pick (reload keeps it)
    name = st.selectbox(t("run.pick"), names, key="runs_pick", label_visibility="collapsed",
                        on_change=ui.address_follows if follow else None, args=("runs_pick",))
    if follow and linked != name:
        st.query_params["run"] = name
    actions(name, runs, pending)
