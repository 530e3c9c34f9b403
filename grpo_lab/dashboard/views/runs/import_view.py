"""The Runs page's import: a finished TRL or verl run's folder as a run of this lab, through the same
checks as `python -m grpo_lab.rundir.import` (grpo_lab/rundir/import.py; docs/trl-and-verl.md). The
folder must lie inside the data folders a launch form may reach (launching/allowed.py): the project,
the runs folder, and GRPO_LAB_DATA_DIRS."""

from __future__ import annotations

import importlib
from pathlib import Path

import streamlit as st

from grpo_lab.dashboard import markup
from grpo_lab.dashboard.i18n import t
from grpo_lab.dashboard.reading import data
from grpo_lab.launching import allowed
from grpo_lab.rundir.importers.build import SourceError
from grpo_lab.rundir.reader import RunNameError

importer = importlib.import_module("grpo_lab.rundir.import")  # `import` is a keyword


def form(runs_dir: Path) -> None:
    with st.form("import_run", clear_on_submit=False):
        c1, c2, c3 = st.columns([3, 2, 1])
        source = c1.text_input(t("import.source"), key="import_source", placeholder="/path/to/trl-output")
        name = c2.text_input(t("import.name"), key="import_name")
        fmt = c3.selectbox(t("import.format"), importer.FORMATS, key="import_format")
        sent = st.form_submit_button(t("import.button"))
    if sent:
        start(Path(source.strip()).expanduser(), name.strip(), runs_dir, fmt)
    if message := st.session_state.pop("import_message", None):
        (st.success if message[0] == "ok" else st.error)(markup.md(message[1]))


def start(source: Path, name: str, runs_dir: Path, fmt: str) -> None:
    """Import, or say in one line why not (the importer's own message); nothing is written then."""
    try:
        resolved = source.resolve()
        if not any(resolved.is_relative_to(folder) for folder in allowed.data_dirs(runs_dir)):
            raise SourceError(t("import.outside", source=source, env=allowed.DATA_DIRS_ENV))
        kind, target = importer.import_folder(resolved, name, runs_dir, fmt=fmt)
    except (SourceError, RunNameError, OSError) as exc:
        st.session_state["import_message"] = ("error", t("import.failed", error=exc))
        return
    data.forget_runs()  # list it now
    st.session_state["import_message"] = ("ok", t("import.done", kind=kind.upper(), name=target.name))
