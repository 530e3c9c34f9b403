"""The GRPO objective: the formula term by term, a worked example step by step, why each
response's terms are divided by its length, and what changes when a rollout has tool turns."""

import streamlit as st

from grpo_lab.dashboard.concepts import tool_turns, worked
from grpo_lab.dashboard.i18n import t

st.title(t("obj.title"))
st.markdown(t("obj.intro"))
st.latex(
    r"J_{\text{GRPO}}(\theta) = \mathbb{E}_{q,\ \{o_i\}_{i=1}^{G} \sim \pi_{\text{old}}}\Bigg[\frac{1}{G}\sum_{i=1}^{G}"
    r"\frac{1}{|o_i|}\sum_{t=1}^{|o_i|}\Big(\min\big(r_{i,t}(\theta)\,\hat A_{i,t},\ "
    r"\operatorname{clip}(r_{i,t}(\theta),1-\varepsilon,1+\varepsilon)\,\hat A_{i,t}\big)"
    r" - \beta\, D_{\mathrm{KL}}\big(\pi_\theta\,\|\,\pi_{\text{ref}}\big)\Big)\Bigg]"
)
st.markdown(t("obj.terms"))

# --- worked example ---------------------------------------------------------------------------
st.header(t("obj.worked_title"))
st.markdown(t("obj.worked_intro"))
c1, c2, c3 = st.columns([1, 1, 2])
beta = c1.slider(t("obj.beta"), 0.0, 0.5, worked.DEFAULT_BETA, 0.01, key="obj_beta")
eps = c2.slider(t("obj.eps"), 0.05, 0.5, worked.DEFAULT_EPS, 0.01, key="obj_eps")
AGGREGATIONS = {m: t(f"obj.agg.{m}") for m in ("sequence", "token")}
aggregation = c3.radio(t("obj.aggregation"), list(AGGREGATIONS), key="obj_aggregation",
                       format_func=AGGREGATIONS.__getitem__)
ex = worked.compute(beta, eps, aggregation)


def headed(frame, columns):
    return frame[columns].rename(columns={c: t(f"obj.col.{c}") for c in columns})


fmt4 = {t(f"obj.col.{c}"): st.column_config.NumberColumn(format="%.4f")
        for c in ("A", "ratio", "clip_ratio", "rA", "clipA", "min", "kl", "term", "sum_terms", "mean_term")}
fmt4.update({t(f"obj.col.{c}"): st.column_config.NumberColumn(format="%.2f") for c in ("pi_old", "pi_theta", "pi_ref")})

rewards = ", ".join(f"{r:g}" for r in ex.responses["reward"])
st.markdown(t("obj.step1", rewards=rewards, mean=ex.group_mean, std=ex.group_std))
st.dataframe(headed(ex.responses, ["response", "text", "reward", "A"]), hide_index=True, column_config=fmt4)

st.markdown(t("obj.step2"))
st.dataframe(headed(ex.tokens, ["response", "t", "token", "pi_old", "pi_theta", "pi_ref", "A", "ratio",
                                "clip_ratio", "rA", "clipA", "min", "clipped", "kl", "term"]),
             hide_index=True, column_config=fmt4, height=36 * (len(ex.tokens) + 1) + 3)

st.markdown(t(f"obj.step5_{aggregation}"))
st.dataframe(headed(ex.responses, ["response", "length", "sum_terms", "mean_term", "weight"]), hide_index=True,
             column_config={**fmt4, t("obj.col.weight"): st.column_config.NumberColumn(format="%.3f")})
ok = abs(ex.loss - ex.loss_from_trainer) < 1e-9
(st.success if ok else st.error)(t("obj.result", J=ex.objective, loss=ex.loss, trainer=ex.loss_from_trainer))

# --- length normalisation ---------------------------------------------------------------------
st.header(t("obj.len_title"))
st.markdown(t("obj.len_intro"))
long_len = st.slider(t("obj.long_len"), 1, 64, 16, key="obj_long_len")
shares = worked.length_shares(long_len)
st.altair_chart(worked.length_chart(long_len, {
    "title": t("obj.len.title"), "len": t("obj.len.len"), "share": t("obj.len.share"),
    "sequence": t("obj.len.sequence"), "token": t("obj.len.token")}), width="stretch", key="obj_length_chart")
st.markdown(t("obj.len_result", L=long_len, seq_share=shares["sequence"]["long"], seq=shares["sequence"]["objective"],
              tok_share=shares["token"]["long"], tok=shares["token"]["objective"]))
st.caption(t("obj.len_note"))

# --- tool turns: masking, the reward on the final answer, credit to the turns -----------------
tool_turns.show()
