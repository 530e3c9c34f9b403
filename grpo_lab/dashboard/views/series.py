"""Curves for the browser: x-axis choice, EMA smoothing, and the min/max-preserving downsampling
(reading/downsample.py) applied to them.

Pure pandas/numpy (no Streamlit), so the numbers can be tested and benchmarked on their own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from grpo_lab.dashboard.reading.downsample import MAX_POINTS, minmax_indices

def x_values(scalars: pd.DataFrame, mode: str) -> np.ndarray:
    """Step, or minutes since training started (`time` is absolute, so a resume's gap shows)."""
    if mode == "wall":
        t = scalars["time"].to_numpy(dtype=float)
        start = t[0] - float(scalars["wall_s"].iloc[0]) if "wall_s" in scalars else t[0]
        return (t - start) / 60.0
    return scalars["step"].to_numpy(dtype=float)


def ema(values: np.ndarray, weight: float) -> np.ndarray:
    """Debiased exponential moving average (TensorBoard's smoothing): 0 = raw, 0.99 = very smooth.

    NaNs stay NaN and do not break the average. pandas' `adjust=True` is exactly the debiased form:
    s_t = sum_k w^k x_{t-k} / sum_k w^k.
    """
    if weight <= 0 or len(values) == 0:
        return np.asarray(values, dtype=float)
    s = pd.Series(values, dtype=float)
    out = s.ewm(alpha=1.0 - weight, adjust=True, ignore_na=True).mean().to_numpy(copy=True)
    out[np.isnan(s.to_numpy())] = np.nan
    return out


def _kept(scalars: pd.DataFrame, metrics: list[str], smoothing: float,
          max_points: int) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """Per metric present with a value: (name, the rows kept for the browser (positions in `scalars`), raw
    and smoothed at every row). Smoothed over the logged values only; a row without a value stays NaN."""
    out = []
    for metric in metrics:
        if metric not in scalars:
            continue
        raw = scalars[metric].to_numpy(dtype=float)
        logged = np.flatnonzero(~np.isnan(raw))
        if not len(logged):
            continue
        smooth = np.full(len(raw), np.nan)
        smooth[logged] = ema(raw[logged], smoothing)
        out.append((metric, logged[minmax_indices(raw[logged], max_points)], raw, smooth))
    return out


def long_frame(scalars: pd.DataFrame, metrics: list[str], x_mode: str = "step", smoothing: float = 0.0,
               max_points: int = MAX_POINTS, label: str | None = None) -> pd.DataFrame:
    """Rows (x, series, raw, smooth) for the metrics present, each series downsampled.

    `label` names every series by it instead of the metric (one run in a comparison chart).
    """
    if scalars is None or scalars.empty:
        return pd.DataFrame(columns=["x", "series", "raw", "smooth"])
    x = x_values(scalars, x_mode)
    frames = [pd.DataFrame({"x": x[rows], "series": label or metric, "raw": raw[rows], "smooth": smooth[rows]})
              for metric, rows, raw, smooth in _kept(scalars, metrics, smoothing, max_points)]
    if not frames:
        return pd.DataFrame(columns=["x", "series", "raw", "smooth"])
    return pd.concat(frames, ignore_index=True)


@dataclass(frozen=True)
class Picks:
    """Where a click on a chart picks an x: one column of the plot per x the chart draws, from halfway to
    the x before it to halfway to the x after it (the first and last stop at their x, so the axis keeps its
    range), so a click anywhere picks the x nearest the pointer; with each series' values there, for the
    column's tooltip."""

    x: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    values: dict[str, tuple[np.ndarray, np.ndarray]]  # series -> (raw, smoothed) at each x; NaN where not logged


def picks(scalars: pd.DataFrame, metrics: list[str], x_mode: str = "step", smoothing: float = 0.0,
          max_points: int = MAX_POINTS) -> Picks:
    """The columns of long_frame's chart of `metrics`: at every x one of its series draws a point."""
    kept = _kept(scalars, metrics, smoothing, max_points) if scalars is not None and not scalars.empty else []
    if not kept:
        return Picks(np.array([]), np.array([]), np.array([]), {})
    x_all = x_values(scalars, x_mode)
    rows = np.unique(np.concatenate([r for _, r, _, _ in kept]))
    xs, first = np.unique(x_all[rows], return_index=True)  # by x; a step logged twice: its first row
    rows = rows[first]
    mids = (xs[1:] + xs[:-1]) / 2
    return Picks(xs, np.concatenate((xs[:1], mids)), np.concatenate((mids, xs[-1:])),
                 {metric: (raw[rows], smooth[rows]) for metric, _, raw, smooth in kept})


def histogram_grid(hist: pd.DataFrame, max_columns: int = 80) -> pd.DataFrame:
    """The ratio histogram over steps as heatmap cells, steps merged into at most max_columns.

    Each cell: step range, ratio bin, and the share of that range's tokens in the bin.
    """
    cols = ["step_lo", "step_hi", "ratio_lo", "ratio_hi", "share"]
    if hist is None or hist.empty:
        return pd.DataFrame(columns=cols)
    hist = hist.sort_values("step")
    counts = np.array([np.asarray(c, dtype=float) for c in hist["counts"]])
    edges = np.asarray(hist["edges"].iloc[-1], dtype=float)
    steps = hist["step"].to_numpy()
    n = len(steps)
    columns = min(n, max_columns)
    group = (np.arange(n) * columns) // n
    merged = np.zeros((columns, counts.shape[1]))
    np.add.at(merged, group, counts)
    totals = merged.sum(axis=1, keepdims=True)
    share = np.divide(merged, totals, out=np.zeros_like(merged), where=totals > 0)
    lo = np.array([steps[group == g].min() for g in range(columns)])
    hi = np.array([steps[group == g].max() for g in range(columns)]) + 1
    nb = counts.shape[1]
    return pd.DataFrame({
        "step_lo": np.repeat(lo, nb), "step_hi": np.repeat(hi, nb),
        "ratio_lo": np.tile(edges[:-1], columns), "ratio_hi": np.tile(edges[1:], columns),
        "share": share.ravel(),
    })


def histogram_bars(row: pd.Series) -> pd.DataFrame:
    """One step's ratio histogram: bins, counts, and whether a bin lies beyond the clip bounds."""
    edges = np.asarray(row["edges"], dtype=float)
    counts = np.asarray(row["counts"], dtype=float)
    lo_b, hi_b = float(row["clip_low_bound"]), float(row["clip_high_bound"])
    mid = (edges[:-1] + edges[1:]) / 2
    zone = np.where(mid < lo_b, "below 1-eps", np.where(mid > hi_b, "above 1+eps", "inside"))
    return pd.DataFrame({"ratio_lo": edges[:-1], "ratio_hi": edges[1:], "tokens": counts, "zone": zone})
