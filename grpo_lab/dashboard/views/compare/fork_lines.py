"""Compare draws a fork from its fork step on its parent's curve: the fork's line is its parent's scalars up
to the fork step (read from the parent, never copied into the fork), then its own."""

from __future__ import annotations

import pandas as pd

from grpo_lab.dashboard.reading import data
from grpo_lab.rundir import forks

MAX_GENERATIONS = 16  # a fork of a fork of ...: how far back a line is read (and a loop of renamed runs ends)


def with_history(name: str, df: pd.DataFrame) -> pd.DataFrame:
    """Run `name`'s scalars `df`, preceded by its ancestors' up to each fork step (unchanged for a run
    that is not a fork, or whose parent is no longer in the runs folder)."""
    present = {r.name: r for r in data.runs()}
    parents = {n: fork for n, r in present.items() if (fork := forks.fork_of(r.config)) is not None}
    line = forks.lineage(name, parents, MAX_GENERATIONS)
    # from the oldest ancestor down: each generation's own rows joined under the next one's
    joined, upto = None, None
    for parent, step in reversed(line):
        if parent not in present:
            joined, upto = None, None  # the line breaks here: draw from the next one present
            continue
        own = data.scalars(parent).df
        joined = own if joined is None else forks.joined(own, joined, upto)
        upto = step
    return df if joined is None else forks.joined(df, joined, upto)
