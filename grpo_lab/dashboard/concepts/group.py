"""Group advantage demo: A_i = (r_i - mean) / std over a group, by the trainer's `group_advantages`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import altair as alt
import pandas as pd
import torch

from grpo_lab.objective.functions import group_advantages

CHAPTER_REWARDS = (1.0, 3.0, 2.0, 6.0)  # the chapter's group: A = -1.07, 0.00, -0.53, 1.60
# Defaults for responses 5..16 when G is raised: any spread will do.
MORE_REWARDS = (4.0, 5.0, 0.0, 2.0, 3.0, 1.0, 6.0, 4.0, 2.0, 5.0, 3.0, 0.0)
G_MIN, G_MAX = 2, 16
DEMO_STD_MODES = ("group", "sample")  # the page's toggle; "none" is a trainer option too

POSITIVE, NEGATIVE, NEUTRAL = "#2e9e4f", "#d64545", "#9e9e9e"


def default_reward(i: int) -> float:
    return (CHAPTER_REWARDS + MORE_REWARDS)[i]


@dataclass(frozen=True)
class GroupResult:
    rewards: list[float]  # NaN: unscored
    advantages: list[float]
    mean: float
    std: float  # the std that divided (population or N-1)
    zero_std: bool


def compute(rewards: list[float], std_mode: str = "group") -> GroupResult:
    out = group_advantages(torch.tensor([rewards], dtype=torch.float64), std_mode)
    return GroupResult(
        rewards=[float(r) for r in rewards],
        advantages=[float(a) for a in out.advantages[0]],
        mean=float(out.mean[0]),
        std=float(out.std[0]),
        zero_std=bool(out.zero_std[0]),
    )


def clean(x: float, digits: int = 2) -> float:
    """Rounded for display, with -0.0 shown as 0.0."""
    r = round(x, digits)
    return 0.0 if r == 0 else r


def fmt(x: float, digits: int = 2) -> str:
    return "—" if math.isnan(x) else f"{clean(x, digits):.{digits}f}"


def table(result: GroupResult, names: dict[str, str], logged: list[float] | None = None) -> pd.DataFrame:
    """One row per response. `names` maps column ids to (translated) headings."""
    rows = {
        names["response"]: [f"o{i + 1}" for i in range(len(result.rewards))],
        names["reward"]: result.rewards,
        names["centred"]: [r - result.mean for r in result.rewards],
        names["advantage"]: result.advantages,
    }
    if logged is not None:
        rows[names["logged"]] = logged
    return pd.DataFrame(rows)


def _frame(result: GroupResult) -> pd.DataFrame:
    n = len(result.rewards)
    df = pd.DataFrame({
        "response": [f"o{i + 1}" for i in range(n)],
        "order": list(range(n)),
        "reward": result.rewards,
        "advantage": [clean(a, 4) for a in result.advantages],
    })
    df["sign"] = ["+" if a > 0 else "-" if a < 0 else "0" for a in df["advantage"]]
    return df


def _x() -> alt.X:
    return alt.X("response:N", sort=alt.SortField("order"), title=None, axis=alt.Axis(labelAngle=0, labelOverlap=False))


def rewards_chart(result: GroupResult, titles: dict[str, str]) -> alt.LayerChart:
    """The rewards, the group mean (dashed line) and mean +- std (band)."""
    df = _frame(result)
    bars = alt.Chart(df).mark_bar(color="#6c8ebf").encode(
        x=_x(), y=alt.Y("reward:Q", title=titles["reward"], axis=alt.Axis(format="~g")),
        tooltip=["response", alt.Tooltip("reward:Q", format=".3f")])
    stats = pd.DataFrame({"mean": [result.mean], "lo": [result.mean - result.std], "hi": [result.mean + result.std]})
    band = alt.Chart(stats).mark_rect(opacity=0.12, color="#333").encode(y="lo:Q", y2="hi:Q")
    mean_rule = alt.Chart(stats).mark_rule(color="#333", strokeDash=[6, 3], size=2).encode(
        y="mean:Q", tooltip=[alt.Tooltip("mean:Q", format=".3f")])
    return alt.layer(band, bars, mean_rule).properties(title=titles["rewards_title"], height=280)


def advantages_chart(result: GroupResult, titles: dict[str, str]) -> alt.LayerChart:
    """The advantages: green above zero (reinforced), red below (discouraged), values on the bars."""
    df = _frame(result)
    color = alt.Color("sign:N", scale=alt.Scale(domain=["+", "-", "0"], range=[POSITIVE, NEGATIVE, NEUTRAL]),
                      legend=None)
    bars = alt.Chart(df).mark_bar().encode(
        x=_x(), y=alt.Y("advantage:Q", title=titles["advantage"], axis=alt.Axis(format="~g"),
                                scale=alt.Scale(padding=22)), color=color,
        tooltip=["response", alt.Tooltip("advantage:Q", format=".3f")])
    text = alt.Text("advantage:Q", format=".2f")
    above = alt.Chart(df[df["advantage"] >= 0]).mark_text(dy=-8, fontSize=12).encode(x=_x(), y="advantage:Q", text=text)
    below = alt.Chart(df[df["advantage"] < 0]).mark_text(dy=10, fontSize=12).encode(x=_x(), y="advantage:Q", text=text)
    zero = alt.Chart(pd.DataFrame({"y": [0]})).mark_rule(color="#555").encode(y="y:Q")
    return alt.layer(bars, above, below, zero).properties(title=titles["advantages_title"], height=280)
