"""The Runs page's filters and pages, as pure functions over a frame of runs (no Streamlit here).

The frame has one row per run with its raw facts (`state` as the trainer wrote it, `algo`, `sweep`,
`tags` as a tuple); the page turns the rows it shows into labels afterwards, so a filter never
depends on the language of the page.

>>> f = pd.DataFrame({"name": ["a-1", "b-2"], "state": ["running", "queued"], "algo": ["grpo", "ppo"],
...                   "sweep": ["s", ""], "tags": [("x", "y"), ()]})
>>> apply(f, Filters(text="A-", tags=("x",)))["name"].tolist()
['a-1']
>>> apply(f, Filters(states=("queued",), algos=("ppo",)))["name"].tolist()
['b-2']
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

STATES = ("running", "queued", "finished", "failed", "stopped")  # what a person filters by
PAGE_SIZE = 20  # rows per page: 60 runs are three pages, not one long scroll


def state_bucket(state: str) -> str:
    """The filter state of a run's or launch's state: starting and launching count as running;
    a launch that failed to start, was refused, or a state nobody knows, as failed."""
    buckets = {"starting": "running", "launching": "running", "queued elsewhere": "queued"}
    return buckets.get(state, state if state in STATES else "failed")


@dataclass(frozen=True)
class Filters:
    """What the page's filter widgets hold; empty means "no filter"."""

    text: str = ""  # part of the name, any case
    sweeps: tuple[str, ...] = ()  # any of them
    tags: tuple[str, ...] = ()  # every one of them (narrowing, as labels on an issue tracker)
    states: tuple[str, ...] = ()  # any of STATES
    algos: tuple[str, ...] = ()  # any of them


def apply(frame: pd.DataFrame, filters: Filters) -> pd.DataFrame:
    """The rows of `frame` that pass every filter, in their order."""
    keep = pd.Series(True, index=frame.index)
    if filters.text:
        keep &= frame["name"].str.contains(filters.text, case=False, regex=False)
    if filters.sweeps:
        keep &= frame["sweep"].isin(filters.sweeps)
    if filters.tags:
        wanted = set(filters.tags)
        keep &= frame["tags"].map(lambda tags: wanted <= set(tags))
    if filters.states:
        keep &= frame["state"].map(state_bucket).isin(filters.states)
    if filters.algos:
        keep &= frame["algo"].isin(filters.algos)
    return frame[keep]


def pages(rows: int, size: int = PAGE_SIZE) -> int:
    """How many pages `rows` rows fill (at least one, so an empty result still has a page 1).

    >>> pages(0), pages(20), pages(21), pages(60)
    (1, 1, 2, 3)
    """
    return max(1, -(-rows // size))


def page(frame: pd.DataFrame, number: int, size: int = PAGE_SIZE) -> pd.DataFrame:
    """Page `number` (1-based, clamped to the pages there are) of `frame`."""
    number = min(max(1, int(number)), pages(len(frame), size))
    return frame.iloc[(number - 1) * size: number * size]


def choices(frame: pd.DataFrame) -> dict[str, list[str]]:
    """The values each filter can take in this frame, sorted: sweeps, tags, algorithms (states are fixed)."""
    def values(column: str) -> set:
        return set(frame[column].unique()) if column in frame else set()

    tags = frame["tags"][frame["tags"].map(bool)] if "tags" in frame else []  # most runs have none
    return {
        "sweeps": sorted(s for s in values("sweep") if s),
        "tags": sorted({tag for found in tags for tag in found}),
        "algos": sorted(a for a in values("algo") if a and a != "—"),
    }
