"""Compare: two or more runs' curves overlaid, their summary, config diff, and one prompt side by side."""

from __future__ import annotations

import streamlit as st

from grpo_lab.dashboard import compare_view, ui
from grpo_lab.dashboard.i18n import t

st.title("⚖️ " + t("nav.compare"))

with ui.guard(t("nav.compare")):
    compare_view.render()
