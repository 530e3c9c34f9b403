"""The Runs page's archive and trash (launching/housekeeping.py moves the folders).

Every change is a button callback that runs before the script (as runs_view.act), so a click is
never lost to the page's auto-refresh; its outcome is one message line for the next run.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from grpo_lab.dashboard import markup, ui
from grpo_lab.dashboard.i18n import t
from grpo_lab.launching import housekeeping
from grpo_lab.dashboard.reading import data
from grpo_lab.dashboard.views.runs import annotations_view
from grpo_lab.rundir import annotations

MESSAGE = "runs_message"  # session_state: (kind, text) shown once, as runs_view shows its own


def change(action: str, target: str) -> None:
    """Button callback: delete, archive, unarchive or restore `target` (a run name, or a trash entry)."""
    runs_dir = data.runs_dir()
    try:
        if action == "trash":
            housekeeping.trash(runs_dir, target)
            message = t("manage.deleted", name=target)
        elif action == "archive":
            housekeeping.archive(runs_dir, target)
            message = t("manage.archived", name=target)
        elif action == "unarchive":
            housekeeping.unarchive(runs_dir, target)
            message = t("manage.unarchived", name=target)
        elif action == "restore":
            message = t("manage.restored", name=housekeeping.restore(runs_dir, target))
        else:
            message = t("manage.emptied", n=housekeeping.empty_trash(runs_dir))
            st.session_state["trash_confirm"] = False  # the next trash asks again
        st.session_state[MESSAGE] = ("success", message)
    except (ValueError, OSError) as exc:  # HousekeepingError and a bad name are ValueErrors
        st.session_state[MESSAGE] = ("error", str(exc))
    data.forget_runs()
    st.session_state["runs_full_rerun"] = True


def show_message() -> None:
    kind, message = st.session_state.pop(MESSAGE, (None, None))
    if message:
        (st.success if kind == "success" else st.error)(markup.md(message))  # may quote a run's text


def buttons(name: str, cols) -> None:
    """Delete and Archive for a run of the list (refused, with a line, while it trains or waits)."""
    cols[0].button(t("manage.delete"), key="run_trash", help=t("manage.delete_help"), width="stretch",
                   on_click=change, args=("trash", name))
    cols[1].button(t("manage.archive"), key="run_archive", help=t("manage.archive_help"), width="stretch",
                   on_click=change, args=("archive", name))


def _frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["name", "deleted", "algo", "state", "step", "tags"])


def _labels() -> dict[str, str]:
    return {"tags": t("col.tags"), "deleted": t("col.deleted")}


def archive_panel() -> None:
    runs_dir = data.runs_dir()
    st.caption(t("manage.archive_caption", path=runs_dir / housekeeping.ARCHIVE))
    show_message()
    kept = housekeeping.archived(runs_dir)
    if not kept:
        st.info(t("manage.archive_empty"))
        return
    table = _frame([{"name": r.name, "algo": r.get("algo", "—"), "state": ui.state_label(r.state),
                     "step": f"{r.step} / {r.total_steps or '?'}",
                     "tags": " ".join(annotations.read(r.path).tags)} for r in kept]).drop(columns=["deleted"])
    st.dataframe(table, hide_index=True, key="archive_table", column_config=ui.column_config(table.columns, labels=_labels()))
    left, right = st.columns([2, 1])
    name = left.selectbox(t("manage.pick"), [r.name for r in kept], key="archive_pick")
    right.button(t("manage.unarchive"), key="run_unarchive", width="stretch", on_click=change, args=("unarchive", name))
    annotations_view.editor(next(r for r in kept if r.name == name))


def trash_panel() -> None:
    runs_dir = data.runs_dir()
    st.caption(t("manage.trash_caption", path=runs_dir / housekeeping.TRASH))
    show_message()
    entries = housekeeping.trashed(runs_dir)
    if not entries:
        st.info(t("manage.trash_empty"))
        return
    table = _frame([{"name": e.name, "algo": e.info.get("algo", "—"), "state": ui.state_label(e.info.state),
                     "deleted": pd.to_datetime(e.trashed_at, unit="s", utc=True).tz_convert(None),
                     "step": f"{e.info.step} / {e.info.total_steps or '?'}",
                     "tags": " ".join(annotations.read(e.info.path).tags)} for e in entries])
    st.dataframe(table, hide_index=True, key="trash_table", column_config={
        **ui.column_config(table.columns, labels=_labels()),
        "deleted": st.column_config.DatetimeColumn(t("col.deleted"), format="YYYY-MM-DD HH:mm:ss")})
    left, right = st.columns([2, 1])
    by_entry = {e.entry: e for e in entries}
    entry = left.selectbox(t("manage.pick"), list(by_entry), key="trash_pick",
                           format_func=lambda k: f"{by_entry[k].name} ({k.rpartition('@')[2]})")
    right.button(t("manage.restore"), key="run_restore", width="stretch", on_click=change, args=("restore", entry))
    sure = st.checkbox(t("manage.empty_confirm", n=len(entries)), key="trash_confirm")
    st.button(t("manage.empty_trash"), key="empty_trash", type="primary", disabled=not sure, on_click=change,
              args=("empty", ""))
