"""TRL's reward weights, read back from what the run logged, so an imported `reward` is the one TRL trained on.

TRL logs, per generation batch, `reward` = the mean over scored completions of sum_i w_i r_i (a
function's None counts 0; a completion no function scored is left out), and `rewards/<fn>/mean`.
Both are linear in the weights w, so the batches of a run give one equation each:

    reward(step) = sum_i w_i c_i(step)

with c_i from the completions file of that step (exact, None included) or, failing that, the
logged per-function means (exact while every function scored every completion). Least squares
over the steps gives w; it is accepted only when the equations determine it (rank = functions), it
reproduces every logged reward, and it gives back TRL's advantage of every completion
(`reproduces_advantages`). Otherwise the import asks for --reward-weights: no guess.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

TOLERANCE = 1e-4  # relative to the rewards' size: TRL logs float32 means


def batch_terms(per_fn: dict[str, Sequence[float]]) -> dict[str, float] | None:
    """c_i of one batch: each function's sum over the scored completions (None as 0) / their count.

    >>> batch_terms({"a": [1.0, math.nan, math.nan], "b": [0.5, 1.0, math.nan]})
    {'a': 0.5, 'b': 0.75}
    """
    columns = list(per_fn.values())
    scored = [i for i in range(len(columns[0])) if any(not math.isnan(c[i]) for c in columns)] if columns else []
    if not scored:
        return None
    return {fn: sum(0.0 if math.isnan(c[i]) else c[i] for i in scored) / len(scored) for fn, c in per_fn.items()}


def fit(fns: list[str], equations: list[tuple[dict[str, float], float]]) -> dict[str, float] | None:
    """Weights that reproduce every logged reward from its terms, or None when they are not determined.

    >>> fit(["a", "b"], [({"a": 1.0, "b": 0.0}, 2.0), ({"a": 0.5, "b": 1.0}, 1.5)])
    {'a': 2.0, 'b': 0.5}
    >>> fit(["a", "b"], [({"a": 1.0, "b": 1.0}, 2.0)]) is None  # one equation, two weights
    True
    """
    rows = [(terms, b) for terms, b in equations
            if math.isfinite(b) and all(math.isfinite(terms.get(fn, math.nan)) for fn in fns)]
    if not fns or len(rows) < len(fns):
        return None
    a = np.array([[terms[fn] for fn in fns] for terms, _ in rows])
    b = np.array([b for _, b in rows])
    w, _, rank, _ = np.linalg.lstsq(a, b, rcond=None)
    if rank < len(fns) or np.abs(a @ w - b).max() > TOLERANCE * max(1.0, float(np.abs(b).max())):
        return None
    return {fn: float(f"{x:.6g}") for fn, x in zip(fns, w)}  # float32 noise off: 0.49999997 -> 0.5


def reproduces_advantages(batches: list[tuple[dict[str, list[float]], list[float]]], w: dict[str, float],
                          group_size: int) -> bool:
    """Whether TRL's advantages follow from these weights in every batch, under one of TRL's
    scale_rewards ("group": the group's N-1 std, "batch": the batch's, "none"), each divided by std + 1e-4.
    This is the check that makes a fit trustworthy: two logged steps and two functions always have
    *a* solution, but only the true weights give back each completion's advantage.

    The advantages fix the weights' ratios, not their scale (the logged reward does that):

    >>> batch = ({"a": [1.0, 0.0, 1.0, 1.0], "b": [0.0, 1.0, 1.0, 0.0]}, [-0.4999, -0.4999, 1.4997, -0.4999])
    >>> [reproduces_advantages([batch], w, 4) for w in ({"a": 1, "b": 1}, {"a": 2, "b": 2}, {"a": 1, "b": 3})]
    [True, True, False]
    """
    return any(all(_matches(per_fn, adv, w, group_size, mode) for per_fn, adv in batches)
               for mode in ("group", "batch", "none")) if batches else False


def _matches(per_fn: dict[str, list[float]], logged: list[float], w: dict[str, float], group_size: int,
             mode: str) -> bool:
    scores = np.array([per_fn[fn] for fn in w], dtype=float).T  # (rows, functions), NaN: not scored
    n = len(logged) - len(logged) % group_size
    if n == 0:
        return True
    scores, logged_adv = scores[len(scores) - n:], np.array(logged[len(logged) - n:], dtype=float)
    total = np.where(np.isnan(scores).all(axis=1), np.nan, np.nansum(scores * np.array(list(w.values())), axis=1))
    grouped = total.reshape(-1, group_size)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN groups: NaN, as in TRL
        mean = np.nanmean(grouped, axis=1, keepdims=True)
        if mode == "group":
            std = np.nanstd(grouped, axis=1, ddof=1, keepdims=True)
        else:
            std = np.full_like(mean, np.nanstd(total, ddof=1) if mode == "batch" else 0.0)
        adv = (grouped - mean) / (std + 1e-4) if mode != "none" else grouped - mean
    adv = np.nan_to_num(adv.reshape(-1), nan=0.0)
    return bool(np.abs(adv - logged_adv).max() <= 1e-3 * max(1.0, float(np.abs(logged_adv).max())))


def assign_recorded(fns: list[str], recorded: list[float], ordered: bool,
                    equations: list[tuple[dict[str, float], float]]) -> dict[str, float] | None:
    """The weights a run's saved GRPOConfig records (`recorded`, in reward_funcs order) by function.

    `ordered`: `fns` is in reward_funcs order (the completions file's columns are); else (only
    trainer_state.json, whose keys are sorted) the order is unknown, and the one assignment of the
    recorded weights that reproduces every logged reward is taken; None when none or several do.

    >>> assign_recorded(["b", "a"], [2.0, 0.5], True, [])
    {'b': 2.0, 'a': 0.5}
    >>> steps = [({"a": 1.0, "b": 0.0}, 0.5), ({"a": 0.0, "b": 1.0}, 2.0)]
    >>> assign_recorded(["a", "b"], [2.0, 0.5], False, steps)
    {'a': 0.5, 'b': 2.0}
    >>> assign_recorded(["a", "b"], [2.0, 0.5], False, [({"a": 1.0, "b": 1.0}, 2.5)]) is None  # either order fits
    True
    """
    from itertools import permutations  # noqa: PLC0415

    if ordered or len(set(recorded)) <= 1:
        return dict(zip(fns, recorded))
    rows = [(terms, b) for terms, b in equations
            if math.isfinite(b) and all(math.isfinite(terms.get(fn, math.nan)) for fn in fns)]
    fitting = set()
    for order in permutations(recorded) if rows and len(fns) <= 6 else ():
        w = dict(zip(fns, order))
        if all(abs(sum(w[fn] * terms[fn] for fn in fns) - b) <= TOLERANCE * max(1.0, abs(b)) for terms, b in rows):
            fitting.add(tuple(order))
    return dict(zip(fns, fitting.pop())) if len(fitting) == 1 else None
