"""Widgets and helpers the training pages share: the run picker, state badges, warnings, and a
guard that turns an unexpected error into a message instead of a traceback."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator

import streamlit as st

from grpo_lab.dashboard import markup
from grpo_lab.dashboard.reading import data
from grpo_lab.dashboard.i18n import per_language, t
from grpo_lab.rundir.reader import RunInfo

log = logging.getLogger("dashboard")
STATE_ICONS = {"starting": "⏳", "running": "🟢", "finished": "✅", "stopped": "⏹️", "failed": "❌",
               "launching": "🚀", "queued": "⏸️", "queued elsewhere": "🔑", "failed to start": "❌", "unknown": "❔"}
SELECTED = "run"  # session_state key: the run last opened on any page
PICKER_STATE = "run_picker_state"  # session_state key: (run, state) the run picker shows beside the name


@contextlib.contextmanager
def guard(page: str) -> Iterator[None]:
    """Show an unexpected error as one line (details in the server log), never a traceback."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - st.rerun/st.stop are BaseException and pass through
        log.exception("%s page failed", page)
        st.error(t("ui.page_failed", page=page, error=markup.md(f"{type(exc).__name__}: {exc}")))


def state_name(state: str) -> str:
    """A run state (status.json's `state`) in the current language; an unknown one as it is."""
    names = {"starting": t("state.starting"), "running": t("state.running"), "finished": t("state.finished"),
             "stopped": t("state.stopped"), "failed": t("state.failed"), "launching": t("state.launching"), "queued": t("state.queued"),
             "queued elsewhere": t("state.queued_elsewhere"), "failed to start": t("state.failed_to_start"),
             "unknown": t("state.unknown")}
    return names.get(state, str(state))


def state_label(state: str) -> str:
    return f"{STATE_ICONS.get(state, '❔')} {state_name(state)}"


def activity(info: RunInfo) -> str | None:
    """What an active run is busy with where that takes long (status.json's `waiting` and `phase`):
    "waiting for ratings of step 3", "warm start: step 40/80"; None when nothing is said."""
    if info.state not in ("starting", "running"):
        return None
    waiting, phase = info.get("waiting"), info.get("phase")
    if isinstance(waiting, dict) and waiting.get("for") == "ratings" and isinstance(waiting.get("step"), int):
        return t("run_activity.waiting_ratings", step=waiting["step"])
    if isinstance(phase, dict) and phase.get("name") == "warm_start":
        return t("run_activity.warm_start", done=phase.get("done", "?"), total=phase.get("total", "?"))
    return None


def run_state_label(info: RunInfo) -> str:
    """A run's state badge, with what it waits on: "🟢 running · ⏳ waiting for ratings of step 3"."""
    doing = activity(info)
    return state_label(info.state) + (f" · ⏳ {doing}" if doing else "")


def world_label(info: RunInfo) -> str:
    """Where a run trains, from its status: "1 · cpu", "2 · ddp · cuda:0, cuda:1"; "—" before it says."""
    world, devices = info.get("world_size"), info.get("devices")
    if not isinstance(world, int) or world < 1:
        return "—"
    parts = [str(world)]
    if world > 1 and isinstance(info.get("strategy"), str):
        parts.append(info.get("strategy"))
    if isinstance(devices, list) and devices:
        shown = list(dict.fromkeys(str(d) for d in devices))  # 8 processes on "cpu": one "cpu"
        parts.append(", ".join(shown[:8]) + (" …" if len(shown) > 8 else ""))
    return " · ".join(parts)


def warn(problems: list[str], limit: int = 5) -> None:
    """One warning box for a table's problems (missing, empty, damaged parts)."""
    unique = list(dict.fromkeys(problems))
    if unique:
        more = "\n- " + t("ui.more_problems", n=len(unique) - limit) if len(unique) > limit else ""
        lines = "\n".join(f"- {markup.md(p)}" for p in unique[:limit])  # file names and errors: run text
        st.warning(t("ui.readable") + "\n" + lines + more, icon="⚠️")


def headings() -> dict[str, str]:
    """Column -> heading in the current language, for the tables the training pages show. The
    frames keep their column names (code and tests read them); only what the reader sees changes."""
    return {
        "name": t("col.name"), "run": t("col.run"), "algo": t("col.algo"), "model": t("col.model"),
        "task": t("col.task"), "state": t("col.state"), "progress": t("col.progress"), "step": t("col.step"),
        "steps": t("col.steps"), "latest reward": t("col.latest_reward"), "doctor": t("col.doctor"),
        "processes": t("col.processes"),
        "started": t("col.started"), "duration": t("col.duration"), "option": t("col.option"),
        "value": t("col.value"), "source": t("col.source"), "group": t("col.group"), "prompt_id": t("col.prompt_id"),
        "sample_idx": t("col.sample_idx"), "completion": t("col.completion"), "reward": t("col.reward"),
        "advantage": t("col.advantage"), "mean_reward": t("col.mean_reward"), "std": t("col.std"),
        "a_max": t("col.a_max"), "a_min": t("col.a_min"), "mean": t("col.mean"), "effect": t("col.effect"),
        "A_i (recomputed)": t("col.recomputed"), "A_i (logged)": t("col.logged"),
        "A_i (GRPO would use)": t("col.grpo_would_use"), "A (PPO, logged)": t("col.ppo_logged"),
        "effect under GRPO": t("col.effect_grpo"), "answer read": t("col.answer_read"),
        "reference read": t("col.reference_read"), "score": t("col.score"), "decided by": t("col.decided_by"),
        "why": t("col.why"), "position": t("col.position"), "token": t("col.token"), "ratio": t("col.ratio"),
        "return": t("col.return"), "token_reward": t("col.token_reward"), "final reward": t("col.final_reward"),
        "best reward": t("col.best_reward"), "best at step": t("col.best_at"), "final KL": t("col.final_kl"),
        "final clip fraction": t("col.final_clip"), "wall time": t("col.wall_time"),
        "r_i - mean": t("layout_col.r_minus_mean"), "ratio_mean": t("layout_col.ratio_mean"),
        "clip_frac": t("layout_col.clip_frac"), "kl_mean": t("layout_col.kl_mean"),
    }


def column_config(columns, formats: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> dict:
    """st.dataframe's column_config for `columns`: each known column headed in the current language
    (`labels` overrides a heading), the columns of `formats` shown as numbers in that format."""
    heads = {**headings(), **(labels or {})}
    formats = formats or {}
    out = {}
    for c in columns:
        if c in formats:
            out[c] = st.column_config.NumberColumn(heads.get(c), format=formats[c])
        elif c in heads:
            out[c] = st.column_config.Column(heads[c])
    return out


def pick_run(key: str, label: str | None = None, runs: list[RunInfo] | None = None) -> RunInfo | None:
    """A run selector on the run the address names (?run=), else the run last opened anywhere.

    The address is the one truth: a pick writes it in the selector's callback, before the page runs,
    so a rerun for any other reason (a language switch, a refresh) cannot fall back to another run.
    """
    linked = st.query_params.get("run")
    if runs is None and linked and linked not in {r.name for r in data.runs()}:
        return wait_for_run(linked)  # never another run in its place, nor the address rewritten
    runs = data.runs() if runs is None else runs
    names = [r.name for r in runs]
    if not names:
        st.info(t("ui.no_runs"))
        return None
    key = per_language(key)  # the shown state is translated
    if linked in names:
        st.session_state[key] = linked
    elif st.session_state.get(key) not in names:
        wanted = st.session_state.get(SELECTED)
        st.session_state[key] = wanted if wanted in names else names[0]
    shown = {r.name: f"{r.name}  ·  {state_label(r.state)}" for r in runs}
    picked = st.session_state[key]  # its state read now, as the page's State reads it (the listing lags)
    st.session_state[PICKER_STATE] = (picked, data.run(picked).state)  # Live redraws the picker when it changes
    shown[picked] = f"{picked}  ·  {state_label(st.session_state[PICKER_STATE][1])}"
    name = st.selectbox(label or t("run.pick"), names, key=key, format_func=shown.get,
                        on_change=address_follows, args=(key,))
    st.session_state[SELECTED] = name
    if linked != name:
        st.query_params["run"] = name  # the address names the run: reload and share keep it
    return next(r for r in runs if r.name == name)


def wait_for_run(name: str) -> None:
    """The address names a run that is not listed (yet: a run just started from Runs has no folder
    until its trainer starts): say so, look again every 2 s, and draw the page once it is there."""
    st.info(t("ui.run_waiting", name=markup.md(name)))
    if st.button(t("ui.run_waiting_other"), key="run_waiting_other"):
        del st.query_params["run"]
        st.rerun()

    @st.fragment(run_every=2.0)
    def look_again() -> None:
        if name in {r.name for r in data.runs()}:
            st.rerun(scope="app")

    look_again()


def address_follows(key: str) -> None:
    """A run picker's callback: the address names the run just picked."""
    st.query_params["run"] = st.session_state[key]


def x_names() -> dict[str, str]:
    """The x-axis switch's names for "step" and "wall" (elapsed time), in the current language.
    (A format_func gets a dict's lookup, not a function calling t(): it may be called after the run.)"""
    return {"step": t("chart.x_step"), "wall": t("chart.x_wall")}


def x_title(x_mode: str) -> str:
    """The x-axis title of a curve drawn against steps ("step") or elapsed minutes ("wall")."""
    return t("chart.x_step") if x_mode == "step" else t("chart.x_wall_title")


def duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "—"
    seconds = int(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h {m:02d}m" if h else f"{m}m {s:02d}s" if m else f"{s}s"


def run_duration(info: RunInfo) -> float | None:
    started = info.started_at
    if not started:
        return None
    end = time.time() if info.state in data.ACTIVE_STATES else (info.updated_at or started)
    return end - started
