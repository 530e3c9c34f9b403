"""The Runs page's sweeps: each sweep one collapsed row with its progress, per variant how many of
its seeds are queued, running, finished or failed, and a link to Compare its variants.

A run's sweep and variant come from its config.json; a queued run has none yet, so they come from
its queue entry's argv (`--sweep`, `--variant`, as grpo_lab/sweep.py queues them). Both are text
from disk, shown escaped.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from grpo_lab.dashboard.i18n import t
from grpo_lab.dashboard.launching import launcher
from grpo_lab.dashboard.views import markup
from grpo_lab.rundir.layout import read_json

COUNTED = ("queued", "running", "finished", "failed")  # starting/launching count as running, stopped as failed


def _bucket(state: str) -> str:
    return {"starting": "running", "launching": "running", "stopped": "failed", "failed to start": "failed",
            "refused": "failed"}.get(state, state if state in COUNTED else "failed")


def queued_labels(runs_dir: Path, name: str) -> tuple[str, str]:
    """(sweep, variant) of a queued launch, from its queue entry's argv; ('', '') when it has none."""
    argv = (read_json(Path(runs_dir) / launcher.LAUNCH_DIR / f"{name}.json") or {}).get("argv")
    if not isinstance(argv, list):
        return "", ""
    flags = dict(zip(argv[::2], argv[1::2]))
    return str(flags.get("--sweep") or ""), str(flags.get("--variant") or "")


def progress(runs, pending, runs_dir: Path) -> pd.DataFrame:
    """One row per (sweep, variant): seeds queued / running / finished / failed, and steps done of
    steps planned. Runs outside any sweep are left out."""
    rows = []
    for r in runs:
        config = r.config or {}
        if config.get("sweep"):
            rows.append({"sweep": str(config["sweep"]), "variant": str(config.get("variant") or ""),
                         "state": _bucket(r.state), "step": r.step, "total": r.total_steps})
    for p in pending:
        sweep, variant = queued_labels(runs_dir, p.name)
        if sweep:
            state = "queued" if p.queued else "running" if p.alive else "failed"
            rows.append({"sweep": sweep, "variant": variant, "state": state, "step": 0, "total": 0})
    if not rows:
        return pd.DataFrame(columns=["sweep", "variant", *COUNTED, "steps"])
    frame = pd.DataFrame(rows)
    counts = pd.crosstab([frame["sweep"], frame["variant"]], frame["state"]).reindex(columns=list(COUNTED), fill_value=0)
    steps = frame.groupby(["sweep", "variant"])[["step", "total"]].sum()
    out = counts.join(steps).reset_index()
    out["steps"] = [f"{s} / {n or '?'}" for s, n in zip(out["step"], out["total"])]
    return out.drop(columns=["step", "total"])


def render(runs, pending, runs_dir: Path) -> None:
    """One collapsed expander per sweep, newest name last; nothing when no run belongs to a sweep."""
    table = progress(runs, pending, runs_dir)
    for sweep, rows in table.groupby("sweep", sort=True):
        total = int(rows[list(COUNTED)].to_numpy().sum())
        with st.expander(t("sweeps.row", sweep=markup.md(sweep), finished=int(rows["finished"].sum()), total=total,
                           running=int(rows["running"].sum()), queued=int(rows["queued"].sum()),
                           failed=int(rows["failed"].sum()))):
            shown = rows.drop(columns=["sweep"])
            shown = shown.rename(columns={c: t(f"sweeps.col_{c}") for c in shown.columns})
            st.dataframe(shown, hide_index=True)
            left, right = st.columns(2)
            with left:
                st.page_link("app_pages/compare.py", label=t("sweeps.compare"), icon="⚖️", query_params={"sweep": sweep})
            right.button(t("sweeps.list_runs"), key=f"sweep_list_{sweep}", on_click=_list_runs_of, args=(sweep,))


def _list_runs_of(sweep: str) -> None:
    """Button callback: the Runs list filtered to this sweep's runs (runs_view's sweep filter), first page."""
    st.session_state["runs_sweeps"] = [sweep]
    st.session_state["runs_page"] = 1
