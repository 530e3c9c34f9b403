"""Curves for the browser: x-axis choice, EMA smoothing, and min/max-preserving downsampling.

Pure pandas/numpy (no Streamlit), so the numbers can be tested and benchmarked on their own.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# Points per series sent to the browser: a Live chart is half the page wide (about 600 px of plot on a
# 1,500 px window), so 300 min/max pairs put a bucket on every two pixels and draw the same envelope as
# every point would. Vega's work grows with the points: 1,000 a series cost ~0.3 s more on first paint.
MAX_POINTS = 600


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


def minmax_indices(values: np.ndarray, max_points: int = MAX_POINTS) -> np.ndarray:
    """Indices of at most ~max_points rows that keep each bucket's min and max (and both ends).

    Plain striding would hide spikes; keeping every bucket's extremes draws the same envelope.
    """
    n = len(values)
    if n <= max_points:
        return np.arange(n)
    size = -(-n // max(1, (max_points - 2) // 2))  # rows per bucket, rounded up
    buckets = -(-n // size)
    padded = np.full(buckets * size, np.nan)
    padded[:n] = values
    grid = padded.reshape(buckets, size)
    offsets = np.arange(buckets) * size
    lows = np.argmin(np.where(np.isnan(grid), np.inf, grid), axis=1) + offsets
    highs = np.argmax(np.where(np.isnan(grid), -np.inf, grid), axis=1) + offsets
    keep = np.concatenate(([0, n - 1], lows, highs))
    return np.unique(keep[keep < n])


def long_frame(scalars: pd.DataFrame, metrics: list[str], x_mode: str = "step", smoothing: float = 0.0,
               max_points: int = MAX_POINTS, label: str | None = None) -> pd.DataFrame:
    """Rows (x, series, raw, smooth) for the metrics present, each series downsampled.

    `label` names every series by it instead of the metric (one run in a comparison chart).
    """
    frames = []
    if scalars is None or scalars.empty:
        return pd.DataFrame(columns=["x", "series", "raw", "smooth"])
    x = x_values(scalars, x_mode)
    for metric in metrics:
        if metric not in scalars:
            continue
        raw = scalars[metric].to_numpy(dtype=float)
        ok = ~np.isnan(raw)
        if not ok.any():
            continue
        xs, raw = x[ok], raw[ok]
        smooth = ema(raw, smoothing)
        idx = minmax_indices(raw, max_points)
        frames.append(pd.DataFrame({"x": xs[idx], "series": label or metric, "raw": raw[idx], "smooth": smooth[idx]}))
    if not frames:
        return pd.DataFrame(columns=["x", "series", "raw", "smooth"])
    return pd.concat(frames, ignore_index=True)


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
