"""The Runs page's sweeps: each sweep one collapsed row with its progress, per variant how many of
its seeds are in each state, and a link to Compare its variants.

A run's sweep and variant come from its config.json; a launch that has no run folder yet (queued,
or its trainer still starting) has none, so they come from its launch record's command line
(`--sweep`, `--variant`, as grpo_lab/launching/sweep.py queues them: pending_launches.planned, which also reads the
steps it plans). Both are text from disk, shown escaped.

Every count here (the row, the table, Compare's line for a sweep) is `count_states` over `members`:
each run and launch counted once, under its own state, so the counts add up to the runs listed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import streamlit as st

from grpo_lab.dashboard import markup, pages, ui
from grpo_lab.dashboard.i18n import t
from grpo_lab.launching import pending_launches
from grpo_lab.rundir.status import STATES

# a launch's states (no run folder yet), then status.json's (rundir/status.py), then a launch that died
ORDER = ("queued", "queued elsewhere", "launching", *STATES, "failed to start")
ALWAYS = ("queued", "running", "finished", "failed")  # table columns shown even at 0


def launch_state(p: pending_launches.Pending) -> str:
    """A launch without a run folder, as the Runs table names it ("queued elsewhere": by another
    dashboard over this folder, with another key; it starts there, never here)."""
    if p.elsewhere:
        return "queued elsewhere"
    return "queued" if p.queued else "launching" if p.alive else "failed to start"


def count_states(states: Iterable[str]) -> dict[str, int]:
    """How many of `states` are in each state, every one counted once under its own name (ORDER
    first, any other state after, by name), so the counts add up to the runs given.

    >>> count_states(["finished", "queued", "launching", "finished", "stopped", "waiting"])
    {'queued': 1, 'launching': 1, 'finished': 2, 'stopped': 1, 'waiting': 1}
    """
    counts = Counter(str(s) for s in states)
    return {s: counts[s] for s in (*ORDER, *sorted(set(counts) - set(ORDER))) if counts[s]}


def summary_line(sweep: str, counts: dict[str, int]) -> str:
    """'Sweep s: 2 of 6 runs finished · 1 launching · 1 running · 2 queued' in the page's language."""
    others = "".join(" · " + t("sweeps.count_part", n=n, state=ui.state_name(s))
                     for s, n in counts.items() if s != "finished")
    return t("sweeps.row", sweep=markup.md(sweep), finished=counts.get("finished", 0), total=sum(counts.values()),
             others=others)


def members(runs, pending, runs_dir: Path) -> pd.DataFrame:
    """One row per run or launch that belongs to a sweep: name, sweep, variant, state, step, total.
    A launch's total is the steps its record plans (pending_launches.planned), so a variant's total counts
    its queued seeds too."""
    rows = []
    for r in runs:
        config = r.config or {}
        if config.get("sweep"):
            rows.append({"name": r.name, "sweep": str(config["sweep"]), "variant": str(config.get("variant") or ""),
                         "state": r.state, "step": r.step, "total": r.total_steps})
    for p in pending:
        if p.planned.sweep:
            rows.append({"name": p.name, "sweep": p.planned.sweep, "variant": p.planned.variant,
                         "state": launch_state(p), "step": 0, "total": p.planned.total_steps})
    return pd.DataFrame(rows, columns=["name", "sweep", "variant", "state", "step", "total"])


def sweep_counts(sweep: str, runs, pending, runs_dir: Path) -> dict[str, int]:
    """count_states over the runs and launches of one sweep (Compare's line for `?sweep=`)."""
    frame = members(runs, pending, runs_dir)
    return count_states(frame.loc[frame["sweep"] == sweep, "state"])


def progress(runs, pending, runs_dir: Path) -> pd.DataFrame:
    """One row per (sweep, variant): how many seeds are in each state (ALWAYS, and any other state
    present), and steps done of steps planned. Runs outside any sweep are left out."""
    return progress_of(members(runs, pending, runs_dir))


def progress_of(frame: pd.DataFrame) -> pd.DataFrame:
    """progress() of `frame`, members()' rows."""
    columns = [*ALWAYS, *(s for s in count_states(frame["state"]) if s not in ALWAYS)]
    if frame.empty:
        return pd.DataFrame(columns=["sweep", "variant", *columns, "steps"])
    rows = []
    for (sweep, variant), part in frame.groupby(["sweep", "variant"], sort=True):
        counts = count_states(part["state"])
        rows.append({"sweep": sweep, "variant": variant, **{c: counts.get(c, 0) for c in columns},
                     "steps": f"{part['step'].sum()} / {part['total'].sum() or '?'}"})
    return pd.DataFrame(rows, columns=["sweep", "variant", *columns, "steps"])


def render(runs, pending, runs_dir: Path) -> None:
    """One collapsed expander per sweep, newest name last; nothing when no run belongs to a sweep."""
    frame = members(runs, pending, runs_dir)
    table = progress_of(frame)
    for sweep, rows in table.groupby("sweep", sort=True):
        with st.expander(summary_line(sweep, count_states(frame.loc[frame["sweep"] == sweep, "state"]))):
            shown = rows.drop(columns=["sweep"])
            shown = shown.rename(columns={c: t(f"sweeps.col_{c}") if c in ("variant", "steps") else ui.state_name(c)
                                          for c in shown.columns})
            st.dataframe(shown, hide_index=True)
            left, right = st.columns(2)
            with left:
                st.page_link(pages.path("compare"), label=t("sweeps.compare"), icon=pages.icon("compare"),
                             query_params={"sweep": sweep})
            right.button(t("sweeps.list_runs"), key=f"sweep_list_{sweep}", on_click=_list_runs_of, args=(sweep,))


def _list_runs_of(sweep: str) -> None:
    """Button callback: the Runs list filtered to this sweep's runs (runs_view's sweep filter), first page."""
    st.session_state["runs_sweeps"] = [sweep]
    st.session_state["runs_page"] = 1
