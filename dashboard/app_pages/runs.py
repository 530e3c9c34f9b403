"""Runs: every run in the runs folder, start a new one, stop or resume one, read its log."""

from __future__ import annotations

import streamlit as st

from dashboard import data, launch_form, launcher, runs_view, ui

st.title("🗂️ Runs")
st.caption(f"Runs folder: `{data.runs_dir()}`")

with ui.guard("Runs"):
    runs = data.runs()
    active = runs_view.any_active(runs, launcher.pending(data.runs_dir(), {r.name for r in runs}))
    st.fragment(runs_view.render, run_every=2.0 if active else None)(active)
    with st.expander("🚀 Start a training run", expanded=False):
        launch_form.form(data.runs_dir())
