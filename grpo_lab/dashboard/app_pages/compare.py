"""Compare: two or more runs' curves overlaid, their summary, config diff, and one prompt side by side;
or, for `?sweep=NAME` (a link grpo-lab-sweep prints), that sweep's variants with 95% bands."""

from __future__ import annotations

import streamlit as st

from grpo_lab.dashboard import parse, ui
from grpo_lab.dashboard.reading import data, variants_data
from grpo_lab.dashboard.views.compare import compare_view, variants_view
from grpo_lab.dashboard.i18n import t

st.title("⚖️ " + t("nav.compare"))

with ui.guard(t("nav.compare")):
    sweeps = variants_data.sweeps()
    if sweeps:  # a sweep picked here becomes the address's ?sweep=, so the comparison is a link
        current = parse.run_name(st.query_params.get("sweep")) or ""
        options = ["", *sweeps] if current in sweeps or not current else ["", current, *sweeps]
        picked = st.selectbox(t("variants.pick_sweep"), options, index=options.index(current),
                              format_func=lambda s: s or t("variants.no_sweep_picked"), key="cmp_sweep")
        if picked != current:
            if picked:
                st.query_params["sweep"] = picked
            else:
                del st.query_params["sweep"]
            current = picked
    else:
        current = parse.run_name(st.query_params.get("sweep")) or ""
    if current:
        variants_view.render_sweep(current)
    else:
        compare_view.render()
        by_name = {r.name: r for r in data.runs()}
        chosen = [by_name[n] for n in st.session_state.get("cmp_runs") or [] if n in by_name]  # in the order picked
        if len(chosen) >= 2 and st.toggle(t("variants.group_runs"), key="cmp_as_variants",
                                          help=t("variants.group_runs_help")):
            variants_view.render(variants_data.runs_as_variants(chosen), t("variants.runs_heading"))
