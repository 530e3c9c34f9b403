"""The GRPO objective, worked step by step on a small group, with the trainer's functions.

One prompt ("3+4="), G = 4 responses of different lengths; per token the probabilities under the
sampling policy (pi_old), the policy being updated (pi_theta) and the frozen reference (pi_ref).
Every step below calls objective.functions, and the last one checks the total against `grpo_loss`.
"""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import pandas as pd
import torch

from grpo_lab.objective.options import DEFAULT_EPSILON, LossSettings
from grpo_lab.objective.functions import (
    aggregate,
    clipped_surrogate,
    group_advantages,
    grpo_loss,
    kl_k3,
    masked_mean,
    policy_ratio,
)

PROMPT = "3+4="
# (reward, [(token, pi_old, pi_theta, pi_ref), ...]) per response. Chosen so that one token clips
# high (o4 "3": r = 1.6, A > 0) and one clips low (o2 "1": r = 0.75, A < 0).
RESPONSES: tuple[tuple[float, tuple[tuple[str, float, float, float], ...]], ...] = (
    (1.0, (("7", 0.50, 0.58, 0.45), ("</s>", 0.80, 0.82, 0.80))),
    (0.0, (("1", 0.20, 0.15, 0.22), ("2", 0.30, 0.27, 0.30), ("</s>", 0.70, 0.70, 0.72))),
    (0.0, (("8", 0.25, 0.24, 0.25), ("</s>", 0.80, 0.80, 0.80))),
    (1.0, (("3", 0.10, 0.16, 0.10), ("+", 0.50, 0.52, 0.50), ("4", 0.60, 0.62, 0.60),
           ("=", 0.70, 0.71, 0.70), ("7", 0.55, 0.60, 0.50), ("</s>", 0.85, 0.86, 0.85))),
)
DEFAULT_BETA = 0.04  # the trainer's default
DEFAULT_EPS = DEFAULT_EPSILON


def _padded() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, list[list[str]]]:
    """(pi_old, pi_theta, pi_ref, mask) as (G, T) tensors padded with 1.0 / 0, and the tokens."""
    T = max(len(tokens) for _, tokens in RESPONSES)
    G = len(RESPONSES)
    old, new, ref = (torch.ones(G, T, dtype=torch.float64) for _ in range(3))
    mask = torch.zeros(G, T, dtype=torch.float64)
    texts = []
    for i, (_, tokens) in enumerate(RESPONSES):
        texts.append([tok for tok, *_ in tokens])
        for t, (_, p_old, p_new, p_ref) in enumerate(tokens):
            old[i, t], new[i, t], ref[i, t], mask[i, t] = p_old, p_new, p_ref, 1.0
    return old, new, ref, mask, texts


@dataclass(frozen=True)
class Worked:
    responses: pd.DataFrame  # per response: reward, A_i, |o_i|, mean term, weight
    tokens: pd.DataFrame  # per token: every intermediate quantity
    group_mean: float
    group_std: float
    objective: float  # J, to maximise
    loss: float  # -J, what the optimiser minimises
    loss_from_trainer: float  # grpo_loss(...).loss on the same inputs: must equal `loss`


def compute(beta: float = DEFAULT_BETA, eps: float = DEFAULT_EPS, aggregation: str = "sequence") -> Worked:
    old, new, ref, mask, texts = _padded()
    rewards = torch.tensor([[r for r, _ in RESPONSES]], dtype=torch.float64)
    # 1. group advantages: one A_i per response, shared by all its tokens
    adv = group_advantages(rewards)
    A = adv.advantages[0].double()
    # 2. per-token ratio, computed in log space as the trainer does
    logp, logp_old, ref_logp = new.log(), old.log(), ref.log()
    ratio = policy_ratio(logp, logp_old)
    # 3. clipped surrogate per token
    surr = clipped_surrogate(ratio, A[:, None], eps)
    # 4. KL to the reference per token (k3)
    kl = kl_k3(logp, ref_logp)
    # 5. per-token term, then length normalisation and the group mean
    term = surr.objective - beta * kl
    J = aggregate(term, mask, aggregation)
    per_response = masked_mean(term, mask, dim=1)
    lengths = mask.sum(dim=1)
    if aggregation == "sequence":
        weights = torch.full_like(lengths, 1.0 / len(RESPONSES))  # each response counts 1/G
    else:
        weights = lengths / lengths.sum()  # each token counts 1/(all tokens): long responses weigh more
    trainer = grpo_loss(logp, logp_old, ref_logp, A, mask, LossSettings(epsilon=eps, beta=beta, aggregation=aggregation))

    rows = []
    for i, tokens in enumerate(texts):
        for t, tok in enumerate(tokens):
            r = float(ratio[i, t])
            rows.append({
                "response": f"o{i + 1}", "t": t + 1, "token": tok,
                "pi_old": float(old[i, t]), "pi_theta": float(new[i, t]), "pi_ref": float(ref[i, t]),
                "A": float(A[i]), "ratio": r, "clip_ratio": float(surr.clipped_ratio[i, t]),
                "rA": r * float(A[i]), "clipA": float(surr.clipped_ratio[i, t]) * float(A[i]),
                "min": float(surr.objective[i, t]),
                "clipped": bool(surr.clipped_low[i, t] or surr.clipped_high[i, t]),
                "kl": float(kl[i, t]), "term": float(term[i, t]),
            })
    responses = pd.DataFrame({
        "response": [f"o{i + 1}" for i in range(len(texts))],
        "text": ["".join(tok for tok in tokens if tok != "</s>") for tokens in texts],
        "reward": rewards[0].tolist(),
        "A": A.tolist(),
        "length": [int(n) for n in lengths],
        "sum_terms": (term * mask).sum(dim=1).tolist(),
        "mean_term": per_response.tolist(),
        "weight": weights.tolist(),
    })
    return Worked(responses, pd.DataFrame(rows), float(adv.mean[0]), float(adv.std[0]),
                  float(J), float(-J), float(trainer.loss))


# --- why divide by |o_i|: a short good response against a long bad one -----------------------

SHORT_LEN = 4


def length_shares(long_len: int, short_len: int = SHORT_LEN) -> dict[str, dict[str, float]]:
    """Share of the objective carried by each of two responses (short A=+1, long A=-1), and the
    objective itself, under both aggregations. The share of a response is `aggregate` applied to
    its own tokens' indicator: exactly the weight the trainer gives it."""
    T = max(long_len, short_len)
    mask = torch.zeros(2, T, dtype=torch.float64)
    mask[0, :short_len] = 1.0
    mask[1, :long_len] = 1.0
    per_token = torch.tensor([[1.0], [-1.0]], dtype=torch.float64).expand(2, T) * mask  # r = 1: term = A
    out = {}
    for mode in ("sequence", "token"):
        short_share = aggregate(torch.stack([mask[0], torch.zeros(T, dtype=torch.float64)]), mask, mode)
        long_share = aggregate(torch.stack([torch.zeros(T, dtype=torch.float64), mask[1]]), mask, mode)
        out[mode] = {"short": float(short_share), "long": float(long_share),
                     "objective": float(aggregate(per_token, mask, mode))}
    return out


def length_chart(long_len: int, titles: dict[str, str], max_len: int = 64) -> alt.LayerChart:
    """The long response's share of the objective as its length grows, for both aggregations."""
    rows = []
    for n in range(1, max_len + 1):
        shares = length_shares(n)
        rows.append({"len": n, "mode": titles["sequence"], "share": shares["sequence"]["long"]})
        rows.append({"len": n, "mode": titles["token"], "share": shares["token"]["long"]})
    df = pd.DataFrame(rows)
    color = alt.Color("mode:N", title=None, legend=alt.Legend(orient="bottom", labelLimit=0),
                      scale=alt.Scale(domain=[titles["sequence"], titles["token"]], range=["#1f77b4", "#d64545"]))
    lines = alt.Chart(df).mark_line(strokeWidth=2.5).encode(
        x=alt.X("len:Q", title=titles["len"]),
        y=alt.Y("share:Q", title=titles["share"], scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
        color=color)
    now = df[df["len"] == long_len]
    dots = alt.Chart(now).mark_point(filled=True, size=90).encode(
        x="len:Q", y="share:Q", color=color, tooltip=["mode:N", alt.Tooltip("share:Q", format=".1%")])
    rule = alt.Chart(pd.DataFrame({"len": [long_len]})).mark_rule(color="#555", strokeDash=[4, 3]).encode(x="len:Q")
    return alt.layer(lines, rule, dots).properties(title=titles["title"], height=340)
