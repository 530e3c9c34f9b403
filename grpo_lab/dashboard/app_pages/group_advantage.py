"""Group advantage: G reward sliders -> mean, std and each A_i, or a real group from a run."""

import pandas as pd
import streamlit as st

from grpo_lab.dashboard.concepts import group, run_picker
from grpo_lab.dashboard.concepts.from_run import group_rewards
from grpo_lab.dashboard.i18n import t
from grpo_lab.dashboard.reading import data

st.title(t("group.title"))
st.markdown(t("group.intro"))
st.latex(r"A_i = \frac{r_i - \operatorname{mean}(r_1,\dots,r_G)}{\operatorname{std}(r_1,\dots,r_G)}")

STD_LABELS = {"group": t("group.std.group"), "sample": t("group.std.sample")}
NAMES = {k: t(f"group.col.{k}") for k in ("response", "reward", "centred", "advantage", "logged")}
TITLES = {k: t(f"group.chart.{k}") for k in ("reward", "advantage", "rewards_title", "advantages_title")}


def show(result: group.GroupResult, logged: list[float] | None = None) -> None:
    """The numbers, the table and the chart of one group."""
    c1, c2, c3 = st.columns([1, 1, 4])
    c1.metric(t("group.mean"), group.fmt(result.mean, 3))
    c2.metric(t("group.std"), group.fmt(result.std, 3))
    c3.markdown("#### " + t("group.advantages_line", values=", ".join(group.fmt(a) for a in result.advantages)))
    left, right = st.columns(2)
    left.altair_chart(group.rewards_chart(result, TITLES), width="stretch", key="group_rewards_chart")
    right.altair_chart(group.advantages_chart(result, TITLES), width="stretch", key="group_chart")
    if result.zero_std:
        st.warning(t("group.zero_std"))
    st.dataframe(group.table(result, NAMES, logged), hide_index=True,
                 column_config={c: st.column_config.NumberColumn(format="%.4f")
                                for c in (NAMES["reward"], NAMES["centred"], NAMES["advantage"], NAMES["logged"])})


source = st.radio(t("common.source"), ["demo", "run"], horizontal=True, key="group_source",
                  format_func={"demo": t("common.source_demo"), "run": t("common.source_run")}.__getitem__)

if source == "demo":
    left, right = st.columns([1, 3])
    with left:
        G = st.slider(t("group.G"), group.G_MIN, group.G_MAX, 4, key="group_G")
        std_mode = st.radio(t("group.std_mode"), group.DEMO_STD_MODES, key="group_std_mode",
                            format_func=STD_LABELS.__getitem__)
        shift = st.slider(t("group.shift"), -5.0, 5.0, 0.0, 0.5, key="group_shift")
    with right:
        st.caption(t("group.rewards_label"))
        cols = st.columns(4)
        rewards = [
            cols[i % 4].slider(t("group.reward_i", i=i + 1), -10.0, 10.0, group.default_reward(i), 0.5,
                               key=f"group_r{i + 1}")
            for i in range(G)
        ]
    result = group.compute([r + shift for r in rewards], std_mode)
    show(result)
    st.info(t("group.shift_note"))
    if std_mode == "sample":
        st.caption(t("group.sample_note"))
else:
    run = run_picker.pick_run("group", algos=("grpo",))
    picked = run_picker.pick_group(run, "group", "group_pick") if run else None
    if picked:
        step, _, label, members = picked
        settings = data.settings(run)
        std_mode = settings.std_mode
        st.caption(t("run.config", std_mode=std_mode, eps=settings.epsilon, eps_high=settings.epsilon_high,
                     G=settings.group_size or len(members)))
        st.markdown(t("group.run_intro"))
        rewards = group_rewards(members)
        logged = [float(a) for a in members["advantage"]]
        result = group.compute(rewards, std_mode)
        show(result, logged)
        unscored = sum(pd.isna(r) for r in rewards)
        if unscored:
            st.caption(t("group.unscored", n=unscored))
        diff = max(abs(a - b) for a, b in zip(result.advantages, logged))
        (st.success if diff < 1e-4 else st.warning)(
            t("group.run_match" if diff < 1e-4 else "group.run_mismatch", diff=diff))
        if "completion" in members:
            with st.expander(t("group.completions")):
                st.dataframe(members[[c for c in ("sample_idx", "prompt", "completion", "reward", "advantage")
                                      if c in members]], hide_index=True)
