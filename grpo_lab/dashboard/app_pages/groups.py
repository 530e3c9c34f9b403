"""Groups: one prompt's G responses at one step, the advantage computation, and the tokens."""

from __future__ import annotations

import streamlit as st

from grpo_lab.dashboard import ui
from grpo_lab.dashboard.views.groups import groups_view
from grpo_lab.dashboard.i18n import t

st.title("👥 " + t("nav.groups"))

with ui.guard(t("nav.groups")):
    info = ui.pick_run("groups_run")
    if info is not None:
        ui.warn(info.problems)
        groups_view.render(info)
