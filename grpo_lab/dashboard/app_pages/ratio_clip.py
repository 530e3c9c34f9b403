"""Ratio and clip: pi_old, pi_new, A, epsilon -> the chapter's table and the clipped objective curve,
or one real token from a run."""

import math

import pandas as pd
import streamlit as st

from grpo_lab.dashboard.concepts import clip, run_picker
from grpo_lab.dashboard.concepts.from_run import token_label
from grpo_lab.dashboard.i18n import t
from grpo_lab.dashboard.reading import data

st.title(t("clip.title"))
st.markdown(t("clip.intro"))
st.latex(r"r = \frac{\pi_\theta(o_t)}{\pi_{\text{old}}(o_t)} \qquad "
         r"\min\big(r\,A,\ \operatorname{clip}(r,\,1-\varepsilon,\,1+\varepsilon_{\text{high}})\,A\big)")

TITLES = {
    "pos_panel": t("clip.chart.pos"), "neg_panel": t("clip.chart.neg"), "ratio": t("clip.chart.ratio"),
    "value": t("clip.chart.value"), "unclipped": t("clip.chart.unclipped"), "objective": t("clip.chart.objective"),
    "zero_grad": t("clip.chart.zero_grad"),
}


def table(res: clip.ClipResult, adv: float) -> pd.DataFrame:
    """The chapter's table, as text so every row shows its own kind of value."""
    rows = [
        ("clip.row.ratio", f"{res.ratio:.4f}"),
        ("clip.row.interval", f"[{res.low:.2f}, {res.high:.2f}]"),
        ("clip.row.clipped_ratio", f"{res.clipped_ratio:.4f}"),
        ("clip.row.rA", f"{res.unclipped:.4f}"),
        ("clip.row.clipA", f"{res.clipped:.4f}"),
        ("clip.row.min", f"{res.objective:.4f}"),
        ("clip.row.gradient", t("clip.grad.no_signal") if adv == 0 else
         t("clip.grad.zero") if res.zero_gradient else t("clip.grad.flows")),
    ]
    return pd.DataFrame({t("clip.col.quantity"): [t(k) for k, _ in rows], t("clip.col.value"): [v for _, v in rows]})


def show(res: clip.ClipResult, adv: float, eps: float, eps_high: float | None) -> None:
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("r", f"{res.ratio:.3f}")
    c2.metric("clip(r)", f"{res.clipped_ratio:.3f}")
    c3.metric("min(r·A, clip(r)·A)", f"{res.objective:.3f}")
    c4.metric(t("clip.row.gradient"), "0" if res.zero_gradient or adv == 0 else "≠ 0")
    st.table(table(res, adv))
    pos, neg = clip.charts(res, adv, eps, eps_high, TITLES)
    left, right = st.columns(2)
    left.altair_chart(pos, width="stretch", key="clip_chart")
    right.altair_chart(neg, width="stretch", key="clip_chart_neg")
    if adv == 0:
        st.caption(t("clip.zero_adv"))
    st.markdown(t("clip.explain"))


source = st.radio(t("common.source"), ["demo", "run"], horizontal=True, key="clip_source",
                  format_func={"demo": t("common.source_demo"), "run": t("common.source_run")}.__getitem__)

if source == "demo":
    c1, c2, c3, c4 = st.columns(4)
    pi_old = c1.slider(t("clip.pi_old"), 0.01, 1.0, clip.CHAPTER["pi_old"], 0.01, key="clip_pi_old")
    pi_new = c2.slider(t("clip.pi_new"), 0.01, 1.0, clip.CHAPTER["pi_new"], 0.01, key="clip_pi_new")
    adv = c3.slider(t("clip.adv"), -3.0, 3.0, clip.CHAPTER["adv"], 0.1, key="clip_adv")
    eps = c4.slider(t("clip.eps"), 0.05, 0.5, clip.CHAPTER["eps"], 0.01, key="clip_eps")
    eps_high = None
    if st.toggle(t("clip.asym"), key="clip_asym"):
        eps_high = st.slider(t("clip.eps_high"), 0.05, 0.5, 0.28, 0.01, key="clip_eps_high")
    show(clip.compute(pi_old, pi_new, adv, eps, eps_high), adv, eps, eps_high)
else:
    run = run_picker.pick_run("clip")
    picked = run_picker.pick_step_rows(run, "tokens", "clip") if run else None
    if picked:
        step, tokens = picked
        settings = data.settings(run)
        eps, eps_high = settings.epsilon, settings.epsilon_high
        st.caption(t("run.config", std_mode=settings.std_mode, eps=eps, eps_high=eps_high,
                     G=settings.group_size or "?"))
        st.markdown(t("clip.run_intro"))
        if st.toggle(t("clip.only_clipped"), key="clip_only_clipped") and tokens["clipped"].any():
            tokens = tokens[tokens["clipped"]]
        tokens = tokens.reset_index(drop=True)
        labels = [token_label(row) for _, row in tokens.iterrows()]
        clipped = [i for i, c in enumerate(tokens["clipped"]) if bool(c)]
        label = st.selectbox(t("run.token"), labels, index=clipped[0] if clipped else 0, key="clip_token")
        row = tokens.iloc[labels.index(label) if label in labels else 0]
        adv = float(row["advantage"])
        res = clip.compute_from_logp(float(row["logp_new"]), float(row["logp_old"]), adv, eps, eps_high)
        yes, no = t("common.yes"), t("common.no")
        st.info(t("clip.run_logged", ratio=float(row["ratio"]), adv=adv, clipped=yes if bool(row["clipped"]) else no,
                  r=res.ratio, c=yes if res.zero_gradient else no))
        st.caption(t("clip.probs", old=math.exp(row["logp_old"]), new=math.exp(row["logp_new"])))
        show(res, adv, eps, eps_high)
