"""PPO vs GRPO: the two structures side by side, which models train, three misconceptions, and the
measured figures of this lab's runs of each algorithm."""

import pandas as pd
import streamlit as st

from grpo_lab.dashboard.reading import data
from grpo_lab.dashboard.concepts import from_run, structure
from grpo_lab.dashboard.i18n import t
from grpo_lab.rundir.reader import RunInfo

st.title(t("ppo.title"))
st.markdown(t("ppo.intro"))

NODE_KEYS = ("prompt", "policy", "one_output", "group_outputs", "reward_model", "reward_or_rule", "reference",
             "value_model", "gae", "group_adv", "no_value", "loss_ppo", "loss_grpo")
labels = {k: t(f"ppo.node.{k}") for k in NODE_KEYS}
labels.update({f"role_{r}": t(f"ppo.role.{r}") for r in ("trained", "frozen", "none")})
labels.update(ppo_title="PPO", grpo_title="GRPO")
st.altair_chart(structure.diagram(labels), width="content", key="structure_chart")
st.caption(t("ppo.diagram_caption"))

st.subheader(t("ppo.models_title"))
st.table(pd.DataFrame({
    t("ppo.col.model"): [t("ppo.row.policy"), t("ppo.row.reward"), t("ppo.row.value"), t("ppo.row.reference")],
    "PPO": [t("ppo.cell.trained"), t("ppo.cell.reward_ppo"), t("ppo.cell.value_ppo"), t("ppo.cell.reference")],
    "GRPO": [t("ppo.cell.trained"), t("ppo.cell.reward_grpo"), t("ppo.cell.value_grpo"),
             t("ppo.cell.reference_grpo")],
}).set_index(t("ppo.col.model")))

st.subheader(t("ppo.misconceptions"))
for col, m in zip(st.columns(3), ("m1", "m2", "m3")):
    with col.container(border=True):
        st.markdown(f"**{t(f'ppo.{m}.title')}**")
        st.markdown(t(f"ppo.{m}.body"))


@st.cache_data(ttl=10, max_entries=32, show_spinner=False)
def figures_of(name: str, fingerprint: float, _run: RunInfo) -> tuple[dict, list[str]]:
    return from_run.run_figures(_run)


st.subheader(t("ppo.measured_title"))
root = data.runs_dir()
runs = data.runs()
by_algo = {algo: [r for r in runs if r.algo == algo] for algo in ("ppo", "grpo")}
if not runs:
    st.info(t("ppo.no_runs"))
else:
    st.caption(t("ppo.measured_intro", root=root))
    chosen = []
    cols = st.columns(2)
    for col, algo in zip(cols, ("ppo", "grpo")):
        options = [r.name for r in by_algo[algo]]
        if not options:
            col.info(t("ppo.missing_algo", algo=algo.upper(), algo_lower=algo))
            continue
        name = col.selectbox(t("ppo.pick", algo=algo.upper()), options, key=f"structure_{algo}_run")
        chosen.append(by_algo[algo][options.index(name) if name in options else 0])
    rows, warnings = [], []
    for run in chosen:
        figures, warn = figures_of(run.name, from_run.latest_mtime(run.path), run)
        warnings += warn
        cfg = run.config or {}
        setup = f"{cfg.get('model', '?')}: {cfg.get('prompts_per_step', '?')} × {cfg.get('group_size', '?')}"
        rows.append({"run": run.name, "algo": run.algo, "setup": setup,
                     **{f: figures.get(f) for f in structure.FIGURES}})
    if warnings:
        st.warning(t("run.unreadable", detail="; ".join(warnings[:3])))
    if rows:
        frame = pd.DataFrame(rows).astype({f: "float64" for f in structure.FIGURES})
        names = {f: t(f"ppo.fig.{f}") for f in structure.FIGURES}
        shown = frame.rename(columns={"run": t("ppo.fig.run"), "algo": t("ppo.fig.algo"), "setup": t("ppo.fig.setup"),
                                      **names})
        st.dataframe(shown, hide_index=True, column_config={
            names["trained_params"]: st.column_config.NumberColumn(format="localized"),
            names["peak_memory_mb"]: st.column_config.NumberColumn(format="%.0f"),
            names["samples_per_step"]: st.column_config.NumberColumn(format="%.0f"),
            names["seconds_per_step"]: st.column_config.NumberColumn(format="%.2f"),
        })
        for row in rows:
            missing = [names[f] for f in structure.FIGURES if row[f] is None]
            if missing:
                st.caption(f"{row['run']}: " + t("ppo.not_logged", fields=", ".join(missing)))
        if len(rows) > 1:
            st.caption(t("ppo.fair"))
        if len(rows) > 1 and frame[list(structure.FIGURES)].notna().any().any():
            st.altair_chart(structure.figures_chart(frame, names), width="content", key="figures_chart")
