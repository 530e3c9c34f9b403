""""Why is my loss 0?": the line under Live's loss chart, from the run's own numbers.

Group-normalised advantages sum to 0 in every group (each is r_i minus the group's mean, over a
scale). On the first pass the policy that is updated is the one that sampled, so every ratio is 1, no
clip is active and the surrogate of a token is just its response's A_i: the policy loss is minus the
aggregate of the A_i, which is 0 for `sequence` aggregation (every response weighs the same) and only
the length weighting away from 0 for `token` and `constant`. loss/total adds beta x KL and takes off
the entropy bonus. So a loss near 0 says nothing about learning; the share of completions with a
non-zero advantage does: those are the ones the gradient pushes up or down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from grpo_lab.dashboard.i18n import t
from grpo_lab.dashboard.reading import data, queries


def expected_policy_loss(advantages: np.ndarray, lengths: np.ndarray, aggregation: str,
                         max_len: int | None = None) -> float:
    """The policy loss at ratio 1: minus objective.functions.aggregate of a (B, T) tensor holding A_i on
    each of response i's L_i tokens (the same reduction, written for constant rows, without torch).

    >>> a, n = np.array([1.0, -1.0, 0.5, -0.5]), np.array([4, 1, 2, 2])
    >>> [round(expected_policy_loss(a, n, m, max_len=4), 4) for m in ("sequence", "token", "constant")]
    [0.0, -0.3333, -0.1875]
    """
    a, n = np.asarray(advantages, dtype=float), np.asarray(lengths, dtype=float)
    if aggregation == "sequence":  # a response with no token in the loss is left out of the mean
        kept = n > 0
        return 0.0 - float(a[kept].mean()) if kept.any() else 0.0  # 0.0 - x: never a "-0"
    total = float((a * n).sum())
    if aggregation == "token":
        return -total / max(float(n.sum()), 1.0)
    if aggregation == "constant" and max_len:
        return -total / (len(a) * max_len)
    raise ValueError(f"loss_aggregation: must be one of sequence, token, constant (constant with max_len), "
                     f"got {aggregation!r}")


@dataclass(frozen=True)
class StepLoss:
    step: int
    completions: int  # trained on: dynamic sampling's dropped groups left out
    with_signal: int  # of those, with A_i != 0
    expected: float | None  # the policy loss at ratio 1 (None: aggregation or lengths unknown)


def step_loss(rows: pd.DataFrame, step: int, aggregation: str | None, max_len: int | None,
              mask_truncated: bool) -> StepLoss:
    """The figures of the note for one step's samples (queries.step_advantages' columns)."""
    if "dropped" in rows:
        rows = rows[~rows["dropped"].fillna(False).astype(bool)]
    adv = rows["advantage"].fillna(0.0).to_numpy(dtype=float)
    expected = None
    lengths = rows["length"] if "length" in rows else None
    if aggregation is not None and lengths is not None and lengths.notna().all() and len(adv):
        n = lengths.to_numpy(dtype=float)
        if mask_truncated and "truncated" in rows:  # DAPO's overlong filtering: no token in the loss
            n = np.where(rows["truncated"].fillna(False).astype(bool).to_numpy(), 0.0, n)
        try:
            expected = expected_policy_loss(adv, n, aggregation, max_len)
        except ValueError:
            expected = None
    return StepLoss(step, len(adv), int((adv != 0).sum()), expected)


def _fmt(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.3g}"


def show(run: str, frame: data.Frame) -> None:
    """The note for the run's last logged step (GRPO only: PPO's advantages are not group-normalised)."""
    settings = data.settings(data.run(run))
    if settings.algo == "ppo" or frame.df.empty:
        return
    step = int(frame.df["step"].iloc[-1])
    rows, _ = queries.step_advantages(run, step)
    if rows.empty:
        return
    note = step_loss(rows, step, settings.loss_aggregation, settings.max_new_tokens, settings.mask_truncated)
    last = frame.df.iloc[-1]
    kl, bonus = last.get("kl/mean"), last.get("loss/entropy_bonus")
    extra = (settings.beta or 0.0) * float(kl) if settings.beta is not None and kl is not None and pd.notna(kl) else None
    if extra is not None and bonus is not None and pd.notna(bonus):
        extra -= float(bonus)
    share = note.with_signal / note.completions if note.completions else 0.0
    how = settings.loss_aggregation if settings.loss_aggregation in ("sequence", "token", "constant") else "unknown"
    st.caption(t("curve.loss_note", expected=_fmt(note.expected), how=t(f"curve.loss_how.{how}"),
                 extra=_fmt(extra), beta=_fmt(settings.beta), logged=_fmt(last.get("loss/policy")), step=step,
                 share=f"{share:.0%}", n=note.with_signal, total=note.completions))
