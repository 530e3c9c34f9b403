"""KL divergence demo: a policy P(alpha) moving away from a fixed reference Q, by the trainer's
`exact_kl`, `kl_k1` and `kl_k3`.

Two outcomes keep the arithmetic visible: Q = [0.25, 0.75] and P(alpha) = [0.25 + alpha, 0.75 - alpha],
so alpha = 0 is P = Q and the default alpha = 0.25 is P = [0.5, 0.5]: KL(P||Q) = 0.144, KL(Q||P) = 0.131.
"""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd
import torch

from grpo_lab.objective.functions import exact_kl, kl_k1, kl_k3

REFERENCE = (0.25, 0.75)
DEFAULT_ALPHA = 0.25
ALPHA_MAX = 0.6  # P = [0.85, 0.15]: far enough for both KLs to pass 0.8, near enough to read 0.1
OUTCOMES = ("a", "b")

PQ_COLOR, QP_COLOR = "#1f77b4", "#ff7f0e"
K1_COLOR, K3_COLOR = "#9467bd", "#2ca02c"


def policy(alpha: float) -> torch.Tensor:
    q = torch.tensor(REFERENCE, dtype=torch.float64)
    return q + torch.tensor([alpha, -alpha], dtype=torch.float64)


def kl_both(alpha: float) -> tuple[float, float]:
    """(KL(P||Q), KL(Q||P)) at alpha."""
    p, q = policy(alpha), torch.tensor(REFERENCE, dtype=torch.float64)
    return float(exact_kl(p, q)), float(exact_kl(q, p))


def curve(directions: tuple[str, str], n: int = 121) -> pd.DataFrame:
    """Both directions over alpha in [0, ALPHA_MAX]; `directions` are the two series' labels."""
    alphas = np.linspace(0.0, ALPHA_MAX, n)
    ps = torch.stack([policy(float(a)) for a in alphas])
    qs = torch.tensor(REFERENCE, dtype=torch.float64).expand_as(ps)
    return pd.concat([
        pd.DataFrame({"alpha": alphas, "direction": directions[0], "kl": exact_kl(ps, qs).numpy()}),
        pd.DataFrame({"alpha": alphas, "direction": directions[1], "kl": exact_kl(qs, ps).numpy()}),
    ], ignore_index=True)


@dataclass(frozen=True)
class Estimate:
    exact: float  # KL(P||Q): what k1 and k3 estimate (tokens are sampled from the policy P)
    k1_mean: float
    k3_mean: float
    k1_std: float  # per-token spread: k1 is noisier and can be negative
    k3_std: float
    per_outcome: pd.DataFrame  # outcome, P, Q, k1, k3, count
    running: pd.DataFrame  # n, estimator, mean of the first n samples


def estimate(alpha: float, n: int, seed: int, labels: tuple[str, str] = ("k1", "k3")) -> Estimate:
    """Sample n tokens from P, score each with k1 and k3 against Q, and compare with the exact KL."""
    p, q = policy(alpha), torch.tensor(REFERENCE, dtype=torch.float64)
    gen = torch.Generator().manual_seed(int(seed))
    x = torch.multinomial(p.float(), n, replacement=True, generator=gen)
    log_p, log_q = torch.log(p), torch.log(q)
    k1, k3 = kl_k1(log_p[x], log_q[x]), kl_k3(log_p[x], log_q[x])
    steps = torch.arange(1, n + 1, dtype=torch.float64)
    every = max(1, n // 300)  # thin the running-mean curve to a few hundred points
    idx = torch.arange(every - 1, n, every)
    running = pd.concat([
        pd.DataFrame({"n": steps[idx].numpy(), "estimator": labels[0], "mean": (k1.cumsum(0) / steps)[idx].numpy()}),
        pd.DataFrame({"n": steps[idx].numpy(), "estimator": labels[1], "mean": (k3.cumsum(0) / steps)[idx].numpy()}),
    ], ignore_index=True)
    per_outcome = pd.DataFrame({
        "outcome": list(OUTCOMES),
        "P": p.numpy(),
        "Q": q.numpy(),
        "k1": kl_k1(log_p, log_q).numpy(),
        "k3": kl_k3(log_p, log_q).numpy(),
        "count": torch.bincount(x, minlength=len(REFERENCE)).numpy(),
    })
    return Estimate(
        exact=float(exact_kl(p, q)),
        k1_mean=float(k1.mean()), k3_mean=float(k3.mean()),
        k1_std=float(k1.std()) if n > 1 else 0.0, k3_std=float(k3.std()) if n > 1 else 0.0,
        per_outcome=per_outcome, running=running,
    )


def kl_chart(alpha: float, titles: dict[str, str]) -> alt.LayerChart:
    """KL(P||Q) and KL(Q||P) against alpha; the current alpha as a vertical rule with both values."""
    df = curve((titles["pq"], titles["qp"]))
    pq, qp = kl_both(alpha)
    color = alt.Color("direction:N", title=None, legend=alt.Legend(orient="bottom"),
                      scale=alt.Scale(domain=[titles["pq"], titles["qp"]], range=[PQ_COLOR, QP_COLOR]))
    lines = alt.Chart(df).mark_line(strokeWidth=2.5).encode(
        x=alt.X("alpha:Q", title=titles["alpha"], scale=alt.Scale(domain=[0, ALPHA_MAX], nice=False)),
        y=alt.Y("kl:Q", title=titles["kl"]), color=color)
    rule = alt.Chart(pd.DataFrame({"alpha": [alpha]})).mark_rule(color="#555", strokeDash=[4, 3]).encode(x="alpha:Q")
    now = pd.DataFrame({"alpha": [alpha, alpha], "kl": [pq, qp], "direction": [titles["pq"], titles["qp"]]})
    dots = alt.Chart(now).mark_point(filled=True, size=90).encode(
        x="alpha:Q", y="kl:Q", color=color, tooltip=["direction:N", alt.Tooltip("kl:Q", format=".4f")])
    return alt.layer(lines, rule, dots).properties(title=titles["kl_title"], height=340)


def distribution_chart(alpha: float, titles: dict[str, str]) -> alt.Chart:
    """P and Q as grouped bars over the two outcomes."""
    p = policy(alpha).numpy()
    df = pd.DataFrame({
        "outcome": list(OUTCOMES) * 2,
        "dist": [titles["p"]] * 2 + [titles["q"]] * 2,
        "prob": list(p) + list(REFERENCE),
    })
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("outcome:N", title=titles["outcome"], axis=alt.Axis(labelAngle=0)),
        xOffset="dist:N",
        y=alt.Y("prob:Q", title=titles["prob"], scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("dist:N", title=None, legend=alt.Legend(orient="bottom"),
                        scale=alt.Scale(domain=[titles["p"], titles["q"]], range=[PQ_COLOR, "#bbbbbb"])),
        tooltip=["dist:N", "outcome:N", alt.Tooltip("prob:Q", format=".2f")],
    ).properties(title=titles["dist_title"], height=340)


def running_chart(est: Estimate, titles: dict[str, str]) -> alt.LayerChart:
    """The running mean of k1 and k3 over the samples, converging to the exact KL (dashed)."""
    color = alt.Color("estimator:N", title=None, legend=alt.Legend(orient="bottom"),
                      scale=alt.Scale(domain=[titles["k1"], titles["k3"]], range=[K1_COLOR, K3_COLOR]))
    lines = alt.Chart(est.running).mark_line(strokeWidth=2).encode(
        x=alt.X("n:Q", title=titles["n"]), y=alt.Y("mean:Q", title=titles["kl"]), color=color)
    exact = alt.Chart(pd.DataFrame({"kl": [est.exact], "label": [titles["exact"]]})).mark_rule(
        color="#333", strokeDash=[6, 3], size=2).encode(
        y="kl:Q", tooltip=["label:N", alt.Tooltip("kl:Q", format=".4f")])
    return alt.layer(lines, exact).properties(title=titles["running_title"], height=320)
