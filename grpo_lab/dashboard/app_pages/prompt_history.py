"""A prompt's history: one prompt followed through a run, and the run's prompts learned, forgotten,
never or always solved. Its address names both: /prompt?run=R&prompt=ID (Groups links here)."""

from __future__ import annotations

import streamlit as st

from grpo_lab.dashboard import ui
from grpo_lab.dashboard.i18n import per_language, t
from grpo_lab.dashboard.reading import data
from grpo_lab.dashboard.views import prompt_history_view

st.title("📜 " + t("prompt_history.title"))

with ui.guard(t("prompt_history.title")):
    wanted, key = st.query_params.get("run"), per_language("prompt_run")
    if wanted in {r.name for r in data.runs()}:
        st.session_state[key] = wanted  # a link (?run=) wins over the run picked here before
    info = ui.pick_run("prompt_run")
    if info is not None:
        ui.warn(info.problems)
        prompt_history_view.render(info)
