"""Compare: two or more runs' curves overlaid, their summary, config diff, and one prompt side by side."""

from __future__ import annotations

import streamlit as st

from dashboard import compare_view, ui

st.title("⚖️ Compare")

with ui.guard("Compare"):
    compare_view.render()
