"""KL divergence: a policy moving away from a fixed reference, both directions of KL, and the k1 / k3
per-token estimators from samples beside the exact value."""

import streamlit as st

from grpo_lab.dashboard.concepts import kl
from grpo_lab.dashboard.i18n import t

st.title(t("kl.title"))
st.markdown(t("kl.intro"))
st.latex(r"D_{\mathrm{KL}}(P\,\|\,Q) = \sum_x P(x)\,\log\frac{P(x)}{Q(x)}")

alpha = st.slider(t("kl.alpha"), 0.0, kl.ALPHA_MAX, kl.DEFAULT_ALPHA, 0.01, key="kl_alpha")
p = kl.policy(alpha)
pq, qp = kl.kl_both(alpha)
st.caption(t("kl.p_now", a=float(p[0]), b=float(p[1])))
c1, c2 = st.columns(2)
c1.metric(t("kl.pq"), f"{pq:.3f}")
c2.metric(t("kl.qp"), f"{qp:.3f}")

titles = {
    "pq": t("kl.pq"), "qp": t("kl.qp"), "alpha": t("kl.chart.alpha"), "kl": t("kl.chart.kl"),
    "kl_title": t("kl.chart.title"), "dist_title": t("kl.chart.dist_title"), "outcome": t("kl.chart.outcome"),
    "prob": t("kl.chart.prob"), "p": t("kl.chart.p"), "q": t("kl.chart.q"),
}
left, right = st.columns([3, 2])
left.altair_chart(kl.kl_chart(alpha, titles), width="stretch", key="kl_chart")
right.altair_chart(kl.distribution_chart(alpha, titles), width="stretch", key="kl_dist_chart")
st.info(t("kl.asym", pq=pq, qp=qp))

st.subheader(t("kl.est_title"))
st.markdown(t("kl.est_intro"))
st.latex(r"k_1 = \log\frac{P(x)}{Q(x)} = -\log\rho \qquad k_3 = \rho - \log\rho - 1")
st.markdown(t("kl.est_after"))
s1, s2 = st.columns(2)
n = s1.slider(t("kl.n"), 10, 2000, 200, 10, key="kl_n")
seed = s2.number_input(t("kl.seed"), 0, 10_000, 0, key="kl_seed")
labels = (t("kl.running.k1"), t("kl.running.k3"))
est = kl.estimate(alpha, n, int(seed), labels)
m1, m2, m3 = st.columns(3)
m1.metric(t("kl.exact"), f"{est.exact:.4f}")
m2.metric(t("kl.k1_mean"), f"{est.k1_mean:.4f}", f"{est.k1_mean - est.exact:+.4f}", delta_color="off")
m3.metric(t("kl.k3_mean"), f"{est.k3_mean:.4f}", f"{est.k3_mean - est.exact:+.4f}", delta_color="off")
m2.caption(t("kl.spread", s=est.k1_std))
m3.caption(t("kl.spread", s=est.k3_std))
left, right = st.columns(2)
left.dataframe(est.per_outcome.rename(columns={
    "outcome": t("kl.col.outcome"), "P": t("kl.col.p"), "Q": t("kl.col.q"), "k1": t("kl.col.k1"),
    "k3": t("kl.col.k3"), "count": t("kl.col.count")}), hide_index=True,
    column_config={t(f"kl.col.{c}"): st.column_config.NumberColumn(format="%.4f") for c in ("p", "q", "k1", "k3")})
right.altair_chart(kl.running_chart(est, {
    "k1": labels[0], "k3": labels[1], "n": t("kl.running.n"), "kl": t("kl.chart.kl"),
    "exact": t("kl.exact"), "running_title": t("kl.running.title")}), width="stretch", key="kl_running_chart")
