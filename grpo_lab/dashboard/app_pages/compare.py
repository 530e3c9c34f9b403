"""Compare: two or more runs' curves overlaid, their summary, config diff, and one prompt side by side."""

from __future__ import annotations

import streamlit as st

from grpo_lab.dashboard import ui
from grpo_lab.dashboard.views import compare_view
from grpo_lab.dashboard.i18n import t

st.title("⚖️ " + t("nav.compare"))

with ui.guard(t("nav.compare")):
    compare_view.render()
