"""Widgets and helpers the training pages share: the run picker, state badges, warnings, and a
guard that turns an unexpected error into a message instead of a traceback."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator

import streamlit as st

from dashboard import data
from rundir.reader import RunInfo

log = logging.getLogger("dashboard")
STATE_ICONS = {"starting": "⏳", "running": "🟢", "finished": "✅", "stopped": "⏹️", "failed": "❌",
               "launching": "🚀", "failed to start": "❌", "unknown": "❔"}
SELECTED = "run"  # session_state key: the run last opened on any page


@contextlib.contextmanager
def guard(page: str) -> Iterator[None]:
    """Show an unexpected error as one line (details in the server log), never a traceback."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - st.rerun/st.stop are BaseException and pass through
        log.exception("%s page failed", page)
        st.error(f"The {page} page hit a problem it could not handle: {type(exc).__name__}: {exc}")


def state_label(state: str) -> str:
    return f"{STATE_ICONS.get(state, '❔')} {state}"


def warn(problems: list[str], limit: int = 5) -> None:
    """One warning box for a table's problems (missing, empty, damaged parts)."""
    unique = list(dict.fromkeys(problems))
    if unique:
        more = f"\n- … and {len(unique) - limit} more" if len(unique) > limit else ""
        st.warning("Showing what could be read:\n" + "\n".join(f"- {p}" for p in unique[:limit]) + more, icon="⚠️")


def pick_run(key: str, label: str = "Run", runs: list[RunInfo] | None = None) -> RunInfo | None:
    """A run selector that starts on the run last opened anywhere (or ?run= in the URL)."""
    runs = data.runs() if runs is None else runs
    names = [r.name for r in runs]
    if not names:
        st.info("No runs yet. Start one on the **Runs** page.")
        return None
    wanted = st.query_params.get("run") or st.session_state.get(SELECTED)
    if st.session_state.get(key) not in names:
        st.session_state[key] = wanted if wanted in names else names[0]
    name = st.selectbox(label, names, key=key,
                        format_func=lambda n: f"{n}  ·  {state_label(next(r.state for r in runs if r.name == n))}")
    st.session_state[SELECTED] = name
    if st.query_params.get("run") != name:
        st.query_params["run"] = name  # the address names the run: reload and share keep it
    return next(r for r in runs if r.name == name)


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
