"""How many points of a curve the browser gets: min/max-preserving downsampling, shared by Live's and
Compare's curves (views/series.py) and the variants' bands (reading/variants_data.py)."""

from __future__ import annotations

import numpy as np

# Points per series sent to the browser: a Live or Compare chart is half the page wide (512 px, about
# 440 px of plot, on a 1,500 px window), so 200 min/max pairs put a bucket on every two pixels and
# draw the same envelope as every point would. Vega's work grows with the points (each is a mark whose
# encodings its interpreter evaluates): on Live's first paint of a 10,000-step run, 600 a series took
# about 0.2 s more of the browser's CPU than 400.
MAX_POINTS = 400



def bucket_size(n: int, max_points: int = MAX_POINTS) -> int:
    """Rows per bucket when minmax_indices downsamples n rows (1: every row is drawn).

    >>> bucket_size(10_000), bucket_size(400), bucket_size(401)
    (51, 1, 3)
    """
    return 1 if n <= max_points else -(-n // max(1, (max_points - 2) // 2))


def minmax_indices(values: np.ndarray, max_points: int = MAX_POINTS) -> np.ndarray:
    """Indices of at most ~max_points rows that keep each bucket's min and max (and both ends).

    Plain striding would hide spikes; keeping every bucket's extremes draws the same envelope.
    """
    n = len(values)
    if n <= max_points:
        return np.arange(n)
    size = bucket_size(n, max_points)
    buckets = -(-n // size)
    padded = np.full(buckets * size, np.nan)
    padded[:n] = values
    grid = padded.reshape(buckets, size)
    offsets = np.arange(buckets) * size
    lows = np.argmin(np.where(np.isnan(grid), np.inf, grid), axis=1) + offsets
    highs = np.argmax(np.where(np.isnan(grid), -np.inf, grid), axis=1) + offsets
    keep = np.concatenate(([0, n - 1], lows, highs))
    return np.unique(keep[keep < n])
