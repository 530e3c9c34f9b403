"""Ratio and clip demo: r = pi_new / pi_old and min(r*A, clip(r)*A), by the trainer's functions."""

from __future__ import annotations

import math
from dataclasses import dataclass

import altair as alt
import pandas as pd
import torch

from grpo_lab.objective.options import clip_range
from grpo_lab.objective.functions import clipped_surrogate, policy_ratio

CHAPTER = {"pi_old": 0.4, "pi_new": 0.6, "adv": 1.0, "eps": 0.2}  # r = 1.5, clip(r) = 1.2, min = 1.2
RATIO_MAX = 2.5

UNCLIPPED_COLOR, OBJECTIVE_COLOR, SHADE_COLOR = "#9e9e9e", "#1f77b4", "#d64545"


@dataclass(frozen=True)
class ClipResult:
    ratio: float
    low: float  # 1 - eps_low
    high: float  # 1 + eps_high
    clipped_ratio: float
    unclipped: float  # r * A
    clipped: float  # clip(r) * A
    objective: float  # min of the two: what the trainer maximises
    clipped_low: bool
    clipped_high: bool

    @property
    def zero_gradient(self) -> bool:
        return self.clipped_low or self.clipped_high


def compute_from_logp(logp_new: float, logp_old: float, adv: float, eps: float,
                      eps_high: float | None = None) -> ClipResult:
    """The chapter's table for one token, from log-probabilities (as the trainer has them)."""
    low, high = clip_range(eps, eps_high)
    ratio = policy_ratio(torch.tensor(logp_new, dtype=torch.float64), torch.tensor(logp_old, dtype=torch.float64))
    surr = clipped_surrogate(ratio, torch.tensor(adv, dtype=torch.float64), eps, eps_high)
    r, clipped_ratio = float(ratio), float(surr.clipped_ratio)
    return ClipResult(
        ratio=r, low=low, high=high, clipped_ratio=clipped_ratio,
        unclipped=r * adv, clipped=clipped_ratio * adv, objective=float(surr.objective),
        clipped_low=bool(surr.clipped_low), clipped_high=bool(surr.clipped_high),
    )


def compute(pi_old: float, pi_new: float, adv: float, eps: float, eps_high: float | None = None) -> ClipResult:
    return compute_from_logp(math.log(pi_new), math.log(pi_old), adv, eps, eps_high)


def curves(adv_abs: float, eps: float, eps_high: float | None = None, ratio_max: float = RATIO_MAX,
           n: int = 501) -> pd.DataFrame:
    """The objective against the ratio for A = +|A| and A = -|A|, with the zero-gradient flags."""
    adv_abs = adv_abs if adv_abs > 0 else 1.0
    ratio = torch.linspace(0.0, ratio_max, n, dtype=torch.float64)
    frames = []
    for sign in (1.0, -1.0):
        surr = clipped_surrogate(ratio, torch.tensor(sign * adv_abs, dtype=torch.float64), eps, eps_high)
        frames.append(pd.DataFrame({
            "ratio": ratio.numpy(),
            "panel": "A > 0" if sign > 0 else "A < 0",
            "adv": sign * adv_abs,
            "objective": surr.objective.numpy(),
            "unclipped": (ratio * sign * adv_abs).numpy(),
            "zero_grad": (surr.clipped_low | surr.clipped_high).numpy(),
        }))
    return pd.concat(frames, ignore_index=True)


def shaded_spans(df: pd.DataFrame) -> pd.DataFrame:
    """Contiguous ratio ranges where the gradient is zero, per panel (from the flags, not a formula)."""
    spans = []
    for panel, rows in df.groupby("panel", sort=False):
        start = None
        prev = None
        for r, flag in zip(rows["ratio"], rows["zero_grad"]):
            if flag and start is None:
                start = r
            if not flag and start is not None:
                spans.append({"panel": panel, "x": start, "x2": prev})
                start = None
            prev = r
        if start is not None:
            spans.append({"panel": panel, "x": start, "x2": prev})
    return pd.DataFrame(spans, columns=["panel", "x", "x2"])


def charts(result: ClipResult, adv: float, eps: float, eps_high: float | None,
           titles: dict[str, str]) -> list[alt.LayerChart]:
    """Two panels, A > 0 and A < 0: r*A (grey, dashed), the objective (blue, flat where clipped),
    the zero-gradient region shaded, and the current token as a dot in its panel."""
    ratio_max = max(RATIO_MAX, 1.1 * result.ratio)
    df = curves(abs(adv), eps, eps_high, ratio_max)
    spans = shaded_spans(df)
    long = df.melt(id_vars=["ratio", "panel"], value_vars=["unclipped", "objective"], var_name="term")
    long["term"] = long["term"].map({"unclipped": titles["unclipped"], "objective": titles["objective"]})
    point_panel = "A > 0" if adv >= 0 else "A < 0"
    panels = []
    for panel in ("A > 0", "A < 0"):
        lines = alt.Chart(long[long["panel"] == panel]).mark_line().encode(
            x=alt.X("ratio:Q", title=titles["ratio"], scale=alt.Scale(domain=[0, ratio_max], nice=False)),
            y=alt.Y("value:Q", title=titles["value"]),
            color=alt.Color("term:N", title=None, legend=alt.Legend(orient="bottom"),
                            scale=alt.Scale(domain=[titles["unclipped"], titles["objective"]],
                                            range=[UNCLIPPED_COLOR, OBJECTIVE_COLOR])),
            strokeDash=alt.StrokeDash("term:N", legend=None,
                                      scale=alt.Scale(domain=[titles["unclipped"], titles["objective"]],
                                                      range=[[5, 4], [1, 0]])),
            strokeWidth=alt.value(2.5),
        )
        layers = []
        shade = spans[spans["panel"] == panel]
        if len(shade):
            layers.append(alt.Chart(shade.assign(label=titles["zero_grad"])).mark_rect(
                opacity=0.15, color=SHADE_COLOR).encode(x="x:Q", x2="x2:Q", tooltip=["label:N"]))
        bounds = pd.DataFrame({"x": [result.low, result.high]})
        layers.append(alt.Chart(bounds).mark_rule(color="#777", strokeDash=[2, 2]).encode(x="x:Q"))
        layers.append(lines)
        if panel == point_panel and adv != 0:
            point = pd.DataFrame({"ratio": [result.ratio], "value": [result.objective]})
            layers.append(alt.Chart(point).mark_point(size=120, filled=True, color="black").encode(
                x="ratio:Q", y="value:Q",
                tooltip=[alt.Tooltip("ratio:Q", format=".3f"), alt.Tooltip("value:Q", format=".3f")]))
        title = titles["pos_panel"] if panel == "A > 0" else titles["neg_panel"]
        panels.append(alt.layer(*layers).properties(title=title, height=360))
    return panels
