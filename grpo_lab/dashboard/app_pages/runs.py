"""Runs: every run in the runs folder (filtered, 20 a page), start a new one, stop or resume one, read its
log, tag it, archive or delete it (to the trash, restorable)."""

from __future__ import annotations

import streamlit as st

from grpo_lab.dashboard import ui
from grpo_lab.dashboard import launch_form
from grpo_lab.launching import pending_launches
from grpo_lab.dashboard.reading import data
from grpo_lab.dashboard.views.runs import import_view, runs_view
from grpo_lab.dashboard.i18n import t

st.title("🗂️ " + t("nav.runs"))
st.caption(t("runs.folder", path=data.runs_dir()))

with ui.guard(t("nav.runs")):
    listing = data.listing()
    active = runs_view.any_active(listing, pending_launches.pending(data.runs_dir(), {r.name for r in listing.runs}))
    st.fragment(runs_view.render, run_every=2.0 if active else None)(active)
    if not active:  # nothing refreshes the list: watch the folder, for runs started elsewhere
        st.fragment(runs_view.watch, run_every=runs_view.WATCH_S)(runs_view.mark(listing))
    with st.expander(t("runs.start_expander"), expanded=False):
        launch_form.form(data.runs_dir())
    with st.expander(t("import.expander"), expanded=False):  # a TRL or verl run, as the command line imports it
        import_view.form(data.runs_dir())
