"""One group's advantage computation, worked as the chapter does it, with the trainer's own math.

`grpo_lab.trainer.objective.group_advantages` is the function the trainer called for this very group, so
the table's A_i must equal the logged advantages; `GroupMath.matches` says whether they do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from grpo_lab.dashboard.i18n import t

TOLERANCE = 1e-5
STD_FORMULAS = {
    "group": "std = sqrt( 1/G * sum_i (r_i - mean)^2 )",
    "sample": "std = sqrt( 1/(G-1) * sum_i (r_i - mean)^2 )",
    "none": "std = 1",
}


def std_formula(std_mode: str) -> str:
    """The std of `std_mode` as a formula, with what it is in the current language ('' if unknown)."""
    notes = {"group": t("math.std.group"), "sample": t("math.std.sample"), "none": t("math.std.none")}
    return f"{STD_FORMULAS[std_mode]}  ({notes[std_mode]})" if std_mode in STD_FORMULAS else ""


@dataclass
class GroupMath:
    table: pd.DataFrame  # one row per response, in sample_idx order
    mean: float
    std: float
    zero_std: bool
    max_diff: float  # largest |recomputed A_i - logged A_i|

    @property
    def matches(self) -> bool:
        return self.max_diff <= TOLERANCE


def effect(a: float, reward: float | None, zero_std: bool) -> str:
    if reward is None or (isinstance(reward, float) and math.isnan(reward)):
        return t("math.effect.not_scored")
    if zero_std:
        return t("math.effect.no_spread")
    if a > 0:
        return t("math.effect.up")
    if a < 0:
        return t("math.effect.down")
    return t("math.effect.at_mean")


def compute(rewards: list[float | None], logged: list[float], std_mode: str = "group",
            epsilon: float = 0.0) -> GroupMath:
    """Recompute A_i for one group's rewards (None: unscored) and line it up with the logged A_i.

    epsilon: a trainer that divides by std + epsilon (TRL: 1e-4, config.json `advantage_epsilon`)."""
    from grpo_lab.dashboard.concepts import group  # imports torch: paid only when a group is shown

    r = [math.nan if v is None or (isinstance(v, float) and math.isnan(v)) else float(v) for v in rewards]
    out = group.compute(r, std_mode)
    adv = np.asarray(out.advantages, dtype=float)
    if epsilon and not out.zero_std and std_mode != "none":
        adv = adv * out.std / (out.std + epsilon)  # (r - mean) / (std + eps), from (r - mean) / std
    mean, std, zero = out.mean, out.std, out.zero_std
    logged_arr = np.asarray(logged, dtype=float)
    r_arr = np.asarray(r, dtype=float)
    table = pd.DataFrame({
        "r_i": r_arr,
        "mean": mean,
        "std": std,
        "r_i - mean": r_arr - mean,
        "A_i (recomputed)": adv,
        "A_i (logged)": logged_arr,
        "effect": [effect(a, rv, zero) for a, rv in zip(adv, r)],
    })
    diff = np.abs(adv - logged_arr)
    max_diff = float(np.nanmax(diff)) if len(diff) else 0.0
    return GroupMath(table, mean, std, zero, max_diff)
