"""A prompt's history: one prompt followed through a run, and the run's prompts learned, forgotten,
never or always solved. Its address names both: /prompt?run=R&prompt=ID (Groups links here)."""

from __future__ import annotations

import streamlit as st

from grpo_lab.dashboard import ui
from grpo_lab.dashboard.i18n import t
from grpo_lab.dashboard.views import prompt_history_view

st.title("📜 " + t("prompt_history.title"))

with ui.guard(t("prompt_history.title")):
    info = ui.pick_run("prompt_run")
    if info is not None:
        ui.warn(info.problems)
        prompt_history_view.render(info)
