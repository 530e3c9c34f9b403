"""Live: a run's curves, refreshed every two seconds while it trains (only new parts are read); the
overview first, each other section (grpo_lab/rundir/metrics.py SECTIONS) drawn once its expander is opened."""

from __future__ import annotations

import streamlit as st

from grpo_lab.dashboard import fork_form, ui
from grpo_lab.dashboard.reading import data
from grpo_lab.dashboard.views.live import live_view
from grpo_lab.dashboard.i18n import t

st.title("📈 " + t("nav.live"))

with ui.guard(t("nav.live")):
    info = ui.pick_run("live_run")
    if info is not None:
        c1, c2, c3 = st.columns([1, 2, 2])
        x_mode = c1.segmented_control(t("chart.x_axis"), ["step", "wall"], default="step", key="live_x", required=True,
                                      format_func=ui.x_names().get)
        smoothing = c2.slider(t("chart.smoothing"), 0.0, 0.99, 0.6, 0.01, key="live_smoothing",
                              help=t("chart.smoothing_help"))
        extra = c3.multiselect(t("live.more_metrics"), live_view.other_metric_names(info.name), key="live_extra",
                               placeholder="lr, reward/std, ...")
        active = data.run(info.name).state in data.ACTIVE_STATES  # fresh, as the fragment reads it
        st.fragment(live_view.render, run_every=2.0 if active else None)(info.name, x_mode or "step", smoothing,
                                                                         extra, active)
        fork_form.family(info)  # the run it was forked from, and its forks
        fork_form.panel(info, "live")  # "Fork from step S": the steps its checkpoints allow
