"""Live's "Is the reward honest?" section: the reward-hacking lens's curves (rundir/honesty.py), what each
means, and what this run's data cannot tell.

A run of this trainer wrote the honesty/* scalars: its panels are drawn as any other section's. A run that
did not (TRL and verl imports, older runs) gets them recomputed from its samples table, once the closed
expander is opened (the samples table is the biggest a run has), with the reward weights its config.json
names (else 1 each); the figures its data lacks are said in one line instead of drawn empty.
"""

from __future__ import annotations

from typing import Callable

import pandas as pd
import streamlit as st

from grpo_lab.dashboard import ui
from grpo_lab.dashboard.i18n import t
from grpo_lab.dashboard.reading import data, queries
from grpo_lab.dashboard.views import metrics
from grpo_lab.rewards.strict import strict_passes
from grpo_lab.rundir import honesty
from grpo_lab.rundir import metrics as registry

SECTION = "honesty"  # one of rundir/metrics.py SECTIONS: the registry panels of this section
# the samples columns the recomputation reads (rewards/<fn> added by what the run has)
READ = ("step", "group", "sample_idx", "reward", "length", "strict_pass", "completion", "answer")


def _titles() -> str:
    return " · ".join(t(f"panel.{p.id}.title") for p in registry.PANELS if p.section == SECTION)


def cannot(columns: list[str], df: pd.DataFrame) -> list[str]:
    """What the lens cannot compute for a run with scalars `df` (columns `columns`): the keys of
    live.honesty_cannot.* (strict, length, components, eval), in that order.

    >>> cannot(["honesty/strict_fail_frac"], pd.DataFrame({"honesty/strict_fail_frac": [float("nan")]}))
    ['strict', 'eval']
    """
    out, missing = [], df.attrs.get("missing", ())  # recomputed: what the samples lacked (honesty.from_samples)
    strict = registry.named("honesty/strict_fail_frac")
    if strict not in columns or not df[strict].notna().any():
        out.append("strict")
    out += [k for k in ("length", "components") if k in missing]
    if registry.named("eval/accuracy") not in columns:
        out.append("eval")
    return out


def _weights(info) -> dict[str, float] | None:
    rewards = info.get("rewards") if info.config else None
    if not isinstance(rewards, dict):
        return None
    return {str(k): float(v) for k, v in rewards.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


@st.cache_data(ttl=30.0, max_entries=16, show_spinner=False)
def _recomputed(run: str, v: tuple, scalars_version: tuple, weights: tuple) -> tuple[pd.DataFrame, list[str], list[str]]:
    columns = queries.table_columns(run, "samples")
    picked = [c for c in READ if c in columns] + sorted(c for c in columns if c.startswith("rewards/"))
    if not {"step", "group", "reward"} <= set(picked):
        return pd.DataFrame(), [], ["components"]
    where = " WHERE NOT coalesce(dropped, false)" if "dropped" in columns else ""  # dropped groups: not trained
    sql = "SELECT " + ", ".join(f'"{c}"' for c in picked) + " FROM {src}" + where
    samples, problems = queries.query(run, "samples", sql)
    if samples.empty:
        return pd.DataFrame(), problems, []
    samples, filled = filled_in(samples)
    figures, missing = honesty.from_samples(samples, data.scalars(run).df, dict(weights) or None)
    return figures, problems, missing + filled


def filled_in(samples: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """What an import lacks, from what it has: the strict check run here on each step's top completions
    where it kept the reference `answer` (rewards/strict.py, as the trainer runs it), and the completion's
    length in characters where it kept no token count. Returns the rows and notes (live.honesty_filled.*).

    >>> rows = pd.DataFrame({"step": [1, 1], "group": [0, 0], "reward": [1.0, 0.0], "completion": ["7 7", "3"],
    ...                      "answer": ["7", "7"]})
    >>> out, notes = filled_in(rows)
    >>> out["strict_pass"].tolist(), out["length"].tolist(), notes
    ([False, None], [3, 1], ['strict_here', 'chars'])
    """
    notes = []
    if "strict_pass" not in samples and {"completion", "answer"} <= set(samples.columns):
        verdicts: list = []
        for _step, part in samples.groupby("step", sort=False):
            totals = [None if pd.isna(v) else float(v) for v in part["reward"]]
            checked = honesty.high_scorers(totals, part["group"].tolist())
            answers = [None if pd.isna(a) else a for a in part["answer"]]
            verdicts += zip(part.index, strict_passes(part["completion"].fillna("").tolist(), answers, checked))
        samples = samples.assign(strict_pass=pd.Series(dict(verdicts), dtype=object))
        notes.append("strict_here")
    if "length" not in samples and "completion" in samples:
        samples = samples.assign(length=samples["completion"].fillna("").str.len())
        notes.append("chars")
    return samples, notes


def recomputed(run: str, info) -> tuple[pd.DataFrame, list[str], list[str]]:
    """(the honesty/* figures per step from the samples table, problems reading it, what it lacks)."""
    weights = tuple(sorted((_weights(info) or {}).items()))
    return _recomputed(run, queries.version(run, "samples"), data.scalars(run).version, weights)


def show(run: str, info, frame: data.Frame, inside: list[tuple[int, metrics.Panel]], open_box: Callable,
         draw: Callable) -> None:
    """The section in its closed expander (open_box(label, key) -> the container or None), its panels
    drawn by `draw` (live_view.draw_panels' partial: numbered panels, a frame)."""
    if not inside and not queries.table_columns(run, "samples"):
        return  # nothing to show or recompute from
    # the run's own panels, as every section lists them; a run to recompute: every panel the lens has
    label = t("live.honesty_heading", panels=" · ".join(p.title for _, p in inside) if inside else _titles())
    if (box := open_box(label)) is None:
        return
    with box:
        st.caption(t("live.honesty_intro"))
        df = frame.df
        if not inside:  # another trainer's run, or an older one: recomputed from its samples
            figures, problems, missing = recomputed(run, info)
            ui.warn(problems)
            if figures.empty:
                st.caption(t("live.honesty_none"))
                return
            st.caption(t("live.honesty_recomputed"))
            keep = [c for c in df.columns if not c.startswith("honesty/")] if not df.empty else ["step"]
            df = (df[keep].merge(figures, on="step", how="right") if not df.empty else figures)
            df = df.dropna(axis=1, how="all")  # a figure the samples cannot give is said below, not drawn empty
            df.attrs["missing"] = missing
            first = max((i for i, _ in inside), default=1000)  # chart keys after every registry panel's
            inside = [(first + k, p) for k, p in enumerate(q for q in metrics.panels(list(df.columns))
                                                         if q.section == SECTION)]
            frame = data.Frame(df, [], ("recomputed", *frame.version), 0)
            for note in (k for k in ("strict_here", "chars") if k in missing):
                st.caption(t(f"live.honesty_filled.{note}"))
        if gaps := cannot(list(df.columns), df):
            st.caption(t("live.honesty_cannot", what="; ".join(t(f"live.honesty_cannot.{k}") for k in gaps)))
        draw(inside, frame=frame)
