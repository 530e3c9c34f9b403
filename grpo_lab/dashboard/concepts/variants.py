"""GRPO and its variants: one group through the chapter's GRPO, Dr. GRPO, DAPO and GSPO, side by side.

Every number is the trainer's: advantages from `group_advantages`, each token's weight and push
from `aggregate` and `grpo_loss` (by autograd: the push on a token is -d loss / d log pi_theta, the
amount one gradient-descent step adds to its log-probability per unit of learning rate). The
variants are the objective options of grpo_lab/configs/variant-*.yaml. No Streamlit in this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import altair as alt
import pandas as pd
import torch

from grpo_lab.objective.options import DEFAULT_EPSILON, LossSettings
from grpo_lab.objective.functions import STD_MODES, aggregate, group_advantages, grpo_loss, sequence_ratio


@dataclass(frozen=True)
class Variant:
    """The objective options that tell a variant apart (the trainer's config names in `config_values`)."""

    key: str
    std_mode: str = "group"
    aggregation: str = "sequence"
    importance_level: str = "token"
    eps_low: float = DEFAULT_EPSILON
    eps_high: float | None = None
    mask_truncated: bool = False
    dynamic_sampling: bool = False

    def loss_settings(self, max_len: int) -> LossSettings:
        return LossSettings(epsilon=self.eps_low, epsilon_high=self.eps_high, aggregation=self.aggregation,
                            max_len=max_len, importance_level=self.importance_level)

    def config_values(self) -> dict[str, object]:
        return {"std_mode": self.std_mode, "loss_aggregation": self.aggregation,
                "importance_level": self.importance_level, "epsilon": self.eps_low,
                "epsilon_high": self.eps_high, "mask_truncated": self.mask_truncated,
                "dynamic_sampling": self.dynamic_sampling}


# The four presets (grpo_lab/configs/variant-*.yaml hold the same values; a test checks they agree).
VARIANTS: dict[str, Variant] = {
    "chapter": Variant("chapter"),
    # Dr. GRPO: no std division, and a constant normaliser in place of 1/|o_i| (arXiv:2503.20783)
    "dr_grpo": Variant("dr_grpo", std_mode="none", aggregation="constant"),
    # DAPO: clip-higher, token mean, dynamic sampling, overlong filtering (arXiv:2503.14476)
    "dapo": Variant("dapo", aggregation="token", eps_high=0.28, mask_truncated=True, dynamic_sampling=True),
    # GSPO: one ratio per response, with the paper's narrow clip range (arXiv:2507.18071)
    "gspo": Variant("gspo", importance_level="sequence", eps_low=3e-4, eps_high=4e-4),
}
PRESET_FILES = {"chapter": "variant-grpo.yaml", "dr_grpo": "variant-dr-grpo.yaml",
                "dapo": "variant-dapo.yaml", "gspo": "variant-gspo.yaml"}

# --- the demo group -----------------------------------------------------------------------------

PROMPT = "3+4="
MAX_LEN = 16  # max_new_tokens of the demo: a response this long was cut (truncated)
DEFAULT_REWARDS = (1.0, 0.0, 1.0, 0.0)
DEFAULT_LONG_LEN = 12
DEFAULT_DRIFT = 0.1
EOS = "</s>"
# o1..o3 fixed; o4 the long wrong answer, cut to the slider's length
SHORT_RESPONSES = (("7", EOS), ("1", "2", EOS), ("3", "+", "4", "=", "7", EOS))
LONG_TEXT = tuple("8, or 9, or 10, or 11")
# How each token's log-probability moved since sampling, in units of `drift`: log r_t = drift * z_t.
# o3's first token moved most (as the chapter's clipped "3"); the others wobble both ways.
Z_PATTERN = (1.0, -0.6, 0.4, -0.2, 0.8, -1.0, 0.3)
ODD_TOKEN = (2, 0, 4.0)  # (response, position, z)
PI_OLD = 0.5


@dataclass(frozen=True)
class Group:
    """G responses of one prompt (B = G rows), padded to T tokens."""

    rewards: list[float]  # NaN: unscored
    tokens: list[list[str]]
    logp_old: torch.Tensor  # (G, T) float64
    logp_new: torch.Tensor  # (G, T)
    mask: torch.Tensor  # (G, T) 1 on real tokens
    truncated: torch.Tensor  # (G,) bool
    max_len: int  # max_new_tokens: the constant normaliser's length
    others: list[list[float]] = field(default_factory=list)  # the step's other groups (batch std)

    @property
    def lengths(self) -> list[int]:
        return [int(n) for n in self.mask.sum(dim=1)]


def long_tokens(length: int) -> tuple[list[str], bool]:
    """The long answer's tokens at `length`, and whether it was cut (no EOS within MAX_LEN)."""
    if length >= MAX_LEN:
        return [LONG_TEXT[i % len(LONG_TEXT)] for i in range(MAX_LEN)], True
    return [LONG_TEXT[i % len(LONG_TEXT)] for i in range(length - 1)] + [EOS], False


def demo_group(rewards: tuple[float, ...] | list[float] = DEFAULT_REWARDS, long_len: int = DEFAULT_LONG_LEN,
               drift: float = DEFAULT_DRIFT, other_rewards: list[float] | None = None) -> Group:
    tokens = [list(r) for r in SHORT_RESPONSES]
    long, cut = long_tokens(long_len)
    tokens.append(long)
    G, T = len(tokens), max(len(r) for r in tokens)
    mask = torch.zeros(G, T, dtype=torch.float64)
    z = torch.zeros(G, T, dtype=torch.float64)
    for i, toks in enumerate(tokens):
        mask[i, :len(toks)] = 1.0
        for t in range(len(toks)):
            z[i, t] = Z_PATTERN[(i + t) % len(Z_PATTERN)]
    i, t, value = ODD_TOKEN
    z[i, t] = value
    logp_old = torch.full((G, T), math.log(PI_OLD), dtype=torch.float64)
    return Group(rewards=[float(r) for r in rewards], tokens=tokens, logp_old=logp_old,
                 logp_new=logp_old + drift * z * mask, mask=mask, truncated=torch.tensor([False] * 3 + [cut]),
                 max_len=MAX_LEN, others=[list(other_rewards)] if other_rewards else [])


def run_group(rows: pd.DataFrame, max_len: int, token_rows: pd.DataFrame | None = None,
              others: list[list[float]] | None = None) -> Group:
    """A group of a run's tables/samples rows (sorted by sample_idx). Token log-probabilities come
    from its tables/tokens rows when the run logged them (figures of the last pass), else every
    ratio is 1 (the first pass)."""
    rewards = [float("nan") if v is None or pd.isna(v) else float(v) for v in rows["reward"]]
    lengths = [max(1, int(n)) for n in rows["length"]]
    G, T = len(rows), max(lengths)
    mask = torch.zeros(G, T, dtype=torch.float64)
    logp_old = torch.full((G, T), math.log(PI_OLD), dtype=torch.float64)
    logp_new = logp_old.clone()
    tokens = [[f"t{t}" for t in range(n)] for n in lengths]
    for i, n in enumerate(lengths):
        mask[i, :n] = 1.0
    if token_rows is not None and len(token_rows):
        for i, idx in enumerate(rows["sample_idx"]):
            mine = token_rows[token_rows["sample_idx"] == idx]
            for _, tok in mine.iterrows():
                t = int(tok["position"])
                if t < lengths[i]:
                    logp_old[i, t], logp_new[i, t] = float(tok["logp_old"]), float(tok["logp_new"])
                    tokens[i][t] = str(tok["token"])
    truncated = (torch.tensor([bool(v) for v in rows["truncated"]]) if "truncated" in rows
                 else torch.zeros(G, dtype=torch.bool))
    return Group(rewards=rewards, tokens=tokens, logp_old=logp_old, logp_new=logp_new, mask=mask,
                 truncated=truncated, max_len=max(max_len, T), others=others or [])


# --- one variant on one group ---------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    variant: Variant
    advantages: list[float]  # A_i (NaN for a dropped group: it never reaches the loss)
    zero_std: bool
    dropped: bool  # dynamic sampling threw the group away (another prompt is drawn in its place)
    ratio: torch.Tensor  # (G, T) the ratio the clip sees: per token, or the response's s_i on each token
    seq_ratio: list[float]  # s_i per response (what GSPO clips)
    clipped: torch.Tensor  # (G, T) bool: clip active, zero gradient
    weight: torch.Tensor  # (G, T) d aggregate / d term: the normaliser's weight of each token
    push: torch.Tensor  # (G, T) -d loss / d log pi_theta: what one descent step adds (per unit lr)
    loss_mask: torch.Tensor  # (G, T) tokens in the loss
    loss: float


def advantages_for(group: Group, std_mode: str) -> tuple[list[float], bool]:
    """A_i of the group (first row), and whether it has no spread; batch std sees `group.others` too."""
    batch = [group.rewards] + [r for r in group.others if len(r) == len(group.rewards)]
    out = group_advantages(torch.tensor(batch, dtype=torch.float64), std_mode)
    return [float(a) for a in out.advantages[0]], bool(out.zero_std[0])


def outcome(group: Group, variant: Variant) -> Outcome:
    advantages, zero_std = advantages_for(group, variant.std_mode)
    dropped = variant.dynamic_sampling and zero_std
    logp = group.logp_new.clone().requires_grad_(True)
    adv = torch.tensor(advantages, dtype=torch.float64)
    truncated = group.truncated if variant.mask_truncated else None
    out = grpo_loss(logp, group.logp_old, None, adv, group.mask, variant.loss_settings(group.max_len),
                    truncated=truncated)
    loss_mask = out.loss_mask
    if dropped:
        push = torch.zeros_like(logp)
        loss_mask = torch.zeros_like(group.mask)
    else:
        out.loss.backward()
        push = -logp.grad
    terms = torch.zeros_like(group.mask, requires_grad=True)
    aggregate(terms, loss_mask, variant.aggregation, group.max_len).backward()
    return Outcome(
        variant=variant,
        advantages=[float("nan")] * len(advantages) if dropped else advantages,
        zero_std=zero_std, dropped=dropped,
        ratio=out.ratio.detach(),
        seq_ratio=[float(s) for s in sequence_ratio(group.logp_new, group.logp_old, group.mask)],
        clipped=(out.clipped_low | out.clipped_high) & group.mask.bool(),
        weight=terms.grad * loss_mask,
        push=push.detach() * group.mask,
        loss_mask=loss_mask,
        loss=float("nan") if dropped else float(out.loss.detach()),
    )


def outcomes(group: Group, keys: tuple[str, ...] | None = None) -> dict[str, Outcome]:
    return {k: outcome(group, VARIANTS[k]) for k in (keys or tuple(VARIANTS))}


def summary(group: Group, results: dict[str, Outcome], names: dict[str, str]) -> pd.DataFrame:
    """One row per response, per variant: A_i, the weight of one of its tokens, the push on one of
    its tokens (mean over its tokens), and its share of the total push. `names` translates headings."""
    rows = []
    for i in range(len(group.rewards)):
        row = {names["response"]: f"o{i + 1}", names["reward"]: group.rewards[i],
               names["length"]: group.lengths[i], names["truncated"]: bool(group.truncated[i])}
        for key, res in results.items():
            n = max(group.lengths[i], 1)
            row[f"{names[key]} · A"] = res.advantages[i]
            row[f"{names[key]} · {names['push']}"] = float(res.push[i].sum()) / n
        rows.append(row)
    return pd.DataFrame(rows)


def clip_table(group: Group, results: dict[str, Outcome], names: dict[str, str]) -> pd.DataFrame:
    """Per response: the sequence ratio s_i, and per variant how many of its tokens the clip stopped."""
    rows = []
    for i in range(len(group.rewards)):
        n = group.lengths[i]
        row = {names["response"]: f"o{i + 1}", "s_i": next(iter(results.values())).seq_ratio[i],
               names["max_token_ratio"]: float(torch.exp(group.logp_new[i, :n] - group.logp_old[i, :n]).max())}
        for key, res in results.items():
            row[f"{names[key]} · {names['clipped']}"] = f"{int(res.clipped[i].sum())}/{n}"
        rows.append(row)
    return pd.DataFrame(rows)


# --- charts ---------------------------------------------------------------------------------------

UP, DOWN = "#2e9e4f", "#d64545"


def token_frame(group: Group, results: dict[str, Outcome], names: dict[str, str]) -> pd.DataFrame:
    rows = []
    for key, res in results.items():
        for i, toks in enumerate(group.tokens):
            for t, tok in enumerate(toks):
                if res.dropped:
                    state = names["state_dropped"]
                elif res.loss_mask[i, t] == 0:
                    state = names["state_masked"]
                elif res.clipped[i, t]:
                    state = names["state_clipped"]
                else:
                    state = ""
                rows.append({"variant": names[key], "order": list(results).index(key), "response": f"o{i + 1}",
                             "t": t, "token": tok, "push": float(res.push[i, t]), "state": state,
                             "mark": "✂" if state == names["state_clipped"] else "·" if state else "",
                             "ratio": float(res.ratio[i, t]), "weight": float(res.weight[i, t])})
    return pd.DataFrame(rows)


def push_chart(group: Group, results: dict[str, Outcome], names: dict[str, str]) -> alt.FacetChart:
    """A heatmap per variant: response by token position, coloured by the push on each token
    (green up, red down); ✂ where the clip stopped the gradient, · where the token is out of the loss."""
    df = token_frame(group, results, names)
    top = max(float(df["push"].abs().max()), 1e-9)
    base = alt.Chart(df).encode(
        x=alt.X("t:O", title=names["position"]),
        y=alt.Y("response:N", title=None),
    )
    cells = base.mark_rect(stroke="#fff").encode(
        color=alt.Color("push:Q", title=names["push"], scale=alt.Scale(domain=[-top, 0, top],
                                                                      range=[DOWN, "#f4f4f4", UP])),
        tooltip=["response", "t", "token", alt.Tooltip("push:Q", format=".4f"), alt.Tooltip("ratio:Q", format=".4f"),
                 alt.Tooltip("weight:Q", format=".4f"), "state"])
    marks = base.mark_text(fontSize=13).encode(text="mark:N")
    return alt.layer(cells, marks, data=df).properties(height=150, width=260).facet(
        facet=alt.Facet("variant:N", title=None, sort=alt.SortField("order")), columns=2)


def long_answer_frame(rewards: list[float], names: dict[str, str]) -> pd.DataFrame:
    """The push on each token of the long answer o4, and on o4 in total, as its length grows; at
    the first pass (every ratio 1), so only the advantage and the normaliser differ."""
    rows = []
    for n in range(1, MAX_LEN + 1):
        g = demo_group(rewards, n, drift=0.0)
        for key, res in outcomes(g).items():
            per_token = float(res.push[3, :n].sum()) / n
            rows.append({"len": n, "variant": names[key], "order": list(VARIANTS).index(key),
                         "per_token": per_token, "total": float(res.push[3, :n].sum())})
    return pd.DataFrame(rows)


def long_answer_chart(df: pd.DataFrame, long_len: int, names: dict[str, str], column: str) -> alt.LayerChart:
    color = alt.Color("variant:N", title=None, sort=[names[k] for k in VARIANTS],
                      legend=alt.Legend(orient="bottom", labelLimit=0))
    lines = alt.Chart(df).mark_line(point=True, strokeWidth=2).encode(
        x=alt.X("len:Q", title=names["len"]), y=alt.Y(f"{column}:Q", title=names[column]), color=color,
        tooltip=["variant", "len", alt.Tooltip(f"{column}:Q", format=".4f")])
    rule = alt.Chart(pd.DataFrame({"len": [long_len]})).mark_rule(color="#555", strokeDash=[4, 3]).encode(x="len:Q")
    return alt.layer(lines, rule).properties(title=names[f"{column}_title"], height=300)


# --- groups with equal rewards ----------------------------------------------------------------------


def zero_std_probability(p: float, G: int) -> float:
    """P(all G rewards equal) for 0/1 rewards right with probability p: p^G + (1-p)^G."""
    return p ** G + (1 - p) ** G


def zero_std_frame(sizes: tuple[int, ...] = (4, 8, 16), n: int = 101) -> pd.DataFrame:
    rows = []
    for G in sizes:
        for k in range(n):
            p = k / (n - 1)
            rows.append({"p": p, "G": f"G = {G}", "frac": zero_std_probability(p, G)})
    return pd.DataFrame(rows)


def zero_std_chart(names: dict[str, str], p_now: float) -> alt.LayerChart:
    df = zero_std_frame()
    lines = alt.Chart(df).mark_line(strokeWidth=2.5).encode(
        x=alt.X("p:Q", title=names["p"], axis=alt.Axis(format="%")),
        y=alt.Y("frac:Q", title=names["frac"], scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
        color=alt.Color("G:N", title=None, sort=["G = 4", "G = 8", "G = 16"], legend=alt.Legend(orient="bottom")),
        tooltip=["G", alt.Tooltip("p:Q", format=".0%"), alt.Tooltip("frac:Q", format=".1%")])
    rule = alt.Chart(pd.DataFrame({"p": [p_now]})).mark_rule(color="#555", strokeDash=[4, 3]).encode(x="p:Q")
    return alt.layer(lines, rule).properties(title=names["title"], height=300)


# --- advantage scale: group, sample, batch, none ----------------------------------------------------


def scale_table(rewards: list[float], other: list[float], names: dict[str, str]) -> pd.DataFrame:
    """A_i of this group (o1..oG) and of another group of the same step, under each std_mode."""
    batch = torch.tensor([rewards, other], dtype=torch.float64)
    rows = {names["group"]: [names["this"]] * len(rewards) + [names["other"]] * len(other),
            names["response"]: [f"o{i + 1}" for i in range(len(rewards))] + [f"o{i + 1}" for i in range(len(other))],
            names["reward"]: rewards + other}
    for mode in STD_MODES:
        rows[f"A · {mode}"] = group_advantages(batch, mode).advantages.flatten().tolist()
    return pd.DataFrame(rows)


def masked_share(group: Group, res: Outcome) -> float:
    """Fraction of the group's tokens a variant leaves out of the loss (masking or dropping)."""
    total = float(group.mask.sum())
    return 0.0 if total == 0 else 1.0 - float(res.loss_mask.sum()) / total

