"""One group's advantage computation, worked as the chapter does it, with the trainer's own math.

`grpo_lab.objective.functions.group_advantages` is the function the trainer called for this very group, so
the table's A_i must equal the logged advantages; `GroupMath.matches` says whether they do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from grpo_lab.dashboard.i18n import t
from grpo_lab.objective.options import STD_FORMULAS

TOLERANCE = 1e-5


def std_formula(std_mode: str) -> str:
    """The std of `std_mode` as a formula, with what it is in the current language ('' if unknown)."""
    if std_mode not in STD_FORMULAS:
        return ""
    note = t(std_note_key(std_mode))
    return f"{STD_FORMULAS[std_mode]}  ({note})"


def std_note_key(std_mode: str) -> str:
    """The locale key of a std mode's note: one per objective.options.STD_MODES (tests/dashboard/test_i18n.py checks)."""
    return "math.std." + std_mode


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
            epsilon: float = 0.0, step_groups: list[list[float | None]] | None = None) -> GroupMath:
    """Recompute A_i for one group's rewards (None: unscored) and line it up with the logged A_i.

    epsilon: a trainer that divides by std + epsilon (TRL: 1e-4, config.json `advantage_epsilon`).
    step_groups: std_mode "batch" divides by the std of the whole step: every trained group's rewards
    (this one included), as the trainer passed them to `group_advantages`."""
    import torch

    from grpo_lab.objective.functions import group_advantages  # imports torch: paid only when a group is shown

    def nan_for_none(values):
        return [math.nan if v is None or (isinstance(v, float) and math.isnan(v)) else float(v) for v in values]

    r = nan_for_none(rewards)
    others = [nan_for_none(g) for g in step_groups or [] if len(g) == len(r)] if std_mode == "batch" else []
    out = group_advantages(torch.tensor([r, *others], dtype=torch.float64), std_mode)
    adv = out.advantages[0].double().numpy()
    mean, std, zero = float(out.mean[0]), float(out.std[0]), bool(out.zero_std[0])
    if epsilon and not zero and std_mode != "none":
        adv = adv * std / (std + epsilon)  # (r - mean) / (std + eps), from (r - mean) / std
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
