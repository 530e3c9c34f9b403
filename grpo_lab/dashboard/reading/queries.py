"""The Groups and Compare pages' questions about the big tables (samples, tokens), cached briefly.

A run of 10,000 steps holds a million sample rows; these pages never load them all: each view
asks for one step, one group, or an aggregate, through rundir.query (DuckDB over the visible part
files, damaged parts reported and left out). A group is `(step, group)`, a column of the table.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from grpo_lab.dashboard.reading.data import runs_dir
from grpo_lab.rundir import group_order
from grpo_lab.rundir import query as rq
from grpo_lab.rundir.reader import run_path, table_parts


def version(run: str, table: str) -> tuple:
    return rq.version(run_path(runs_dir(), run), table)


def query(run: str, table: str, sql: str, params: dict[str, Any] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """grpo_lab.rundir.query.query on the run named `run` in the dashboard's runs folder."""
    return rq.query(run_path(runs_dir(), run), table, sql, params)


# --- samples ----------------------------------------------------------------------------------

@st.cache_data(ttl=10.0, max_entries=128, show_spinner=False)
def _distinct(run: str, column: str, v: tuple) -> tuple[list, list[str]]:
    """The sample rows' distinct values of `column` (a fixed name, never user text), ascending."""
    df, problems = query(run, "samples", f"SELECT DISTINCT {column} FROM {{src}} ORDER BY {column}")
    return (df[column].tolist() if not df.empty else []), problems


def sample_steps(run: str) -> tuple[list[int], list[str]]:
    """Steps that have sample rows, ascending."""
    steps, problems = _distinct(run, "step", version(run, "samples"))
    return [int(s) for s in steps], problems


@st.cache_data(ttl=30.0, max_entries=256, show_spinner=False)
def _step_rows(run: str, step: int, v: tuple) -> tuple[pd.DataFrame, list[str]]:
    df, problems = query(run, "samples", "SELECT * EXCLUDE (filename, file_row_number) FROM {src} "
                         'WHERE step = $step ORDER BY "group", sample_idx', {"step": step})
    return df, problems


def step_samples(run: str, step: int) -> tuple[pd.DataFrame, list[str]]:
    """Every completion of one step, by group and sample_idx."""
    return _step_rows(run, int(step), version(run, "samples"))


SUMMARY_SQL = """
SELECT step, "group", any_value(prompt_id) AS prompt_id, any_value(prompt) AS prompt, count(*) AS size,
       avg(reward) AS mean_reward, stddev_pop(reward) AS std,
       max(advantage) AS a_max, min(advantage) AS a_min, max(abs(advantage)) AS a_abs
FROM {src} {where} GROUP BY step, "group" {having} ORDER BY {order} LIMIT {limit}
"""
SUMMARY_MODES = {  # mode: (filter on groups, order)
    "no_signal": ("HAVING max(abs(advantage)) = 0", 'step DESC, "group"'),
    "positive": ("", 'a_max DESC, step DESC, "group"'),
    "negative": ("", 'a_min ASC, step DESC, "group"'),
    "prompt": ("", 'step, "group"'),
}


@st.cache_data(ttl=10.0, max_entries=64, show_spinner=False)
def _summaries(run: str, mode: str, arg: str, limit: int, v: tuple) -> tuple[pd.DataFrame, list[str]]:
    having, order = SUMMARY_MODES[mode]
    where = "WHERE prompt_id = $arg" if mode == "prompt" else ""
    sql = (SUMMARY_SQL.replace("{where}", where).replace("{having}", having)
           .replace("{order}", order).replace("{limit}", str(int(limit))))
    return query(run, "samples", sql, {"arg": arg} if mode == "prompt" else None)


def group_summaries(run: str, mode: str, arg: str = "", limit: int = 200) -> tuple[pd.DataFrame, list[str]]:
    """Groups across the run, one row each (step, group, prompt_id, mean_reward, std, a_max,
    a_min): mode no_signal (every A = 0), positive / negative (largest A first / smallest A
    first), or prompt (the groups of prompt_id `arg`, by step)."""
    return _summaries(run, mode, arg, limit, version(run, "samples"))


@st.cache_data(ttl=10.0, max_entries=64, show_spinner=False)
def _search(run: str, text: str, limit: int, v: tuple) -> tuple[pd.DataFrame, list[str]]:
    sql = (f'SELECT step, "group", prompt_id, sample_idx, completion, reward, advantage FROM {{src}} '
           f'WHERE contains(lower(completion), lower($text)) ORDER BY step DESC, "group", sample_idx LIMIT {int(limit)}')
    return query(run, "samples", sql, {"text": text})


def search_completions(run: str, text: str, limit: int = 200) -> tuple[pd.DataFrame, list[str]]:
    """Completions containing `text` (case-insensitive, literal: no wildcards), newest first."""
    return _search(run, text, limit, version(run, "samples"))


@st.cache_data(ttl=10.0, max_entries=64, show_spinner=False)
def _prompts(run: str, v: tuple) -> tuple[pd.DataFrame, list[str]]:
    return query(run, "samples", "SELECT prompt_id, any_value(prompt) AS prompt FROM {src} GROUP BY prompt_id "
                 "ORDER BY prompt_id")


def prompts(run: str) -> tuple[pd.DataFrame, list[str]]:
    """Each prompt_id of the run with its prompt text (as the model saw it, or as an importer wrote it)."""
    return _prompts(run, version(run, "samples"))


def prompt_ids(run: str) -> tuple[list[str], list[str]]:
    ids, problems = _distinct(run, "prompt_id", version(run, "samples"))
    return [str(i) for i in ids], problems


# --- tokens -----------------------------------------------------------------------------------


@st.cache_data(ttl=30.0, max_entries=256, show_spinner=False)
def _tokens(run: str, step: int, group: int, v: tuple) -> tuple[pd.DataFrame, list[str]]:
    return query(run, "tokens", 'SELECT * EXCLUDE (filename, file_row_number) FROM {src} '
                 'WHERE step = $step AND "group" = $group ORDER BY sample_idx, position', {"step": step, "group": group})


def group_tokens(run: str, step: int, group: int) -> tuple[pd.DataFrame, list[str]]:
    """Token rows of one group (empty when the trainer kept no token detail for it)."""
    if not table_parts(run_path(runs_dir(), run), "tokens")[0]:
        return pd.DataFrame(), []
    return _tokens(run, int(step), int(group), version(run, "tokens"))


def has_token_column(run: str, column: str) -> bool:
    """Whether the run's tokens table has `column` (an optional one: older runs and imports lack it)."""
    if not table_parts(run_path(runs_dir(), run), "tokens")[0]:
        return False
    return column in _token_columns(run, version(run, "tokens"))


@st.cache_data(ttl=30.0, max_entries=64, show_spinner=False)
def _token_columns(run: str, v: tuple) -> list[str]:
    return list(query(run, "tokens", "SELECT * FROM {src} LIMIT 0")[0].columns)


@st.cache_data(ttl=30.0, max_entries=64, show_spinner=False)
def _by_position(run: str, steps: int, tool: bool, v: tuple) -> tuple[pd.DataFrame, list[str]]:
    model = " AND source IS DISTINCT FROM 'tool'" if tool else ""
    return query(run, "tokens", "SELECT position, avg(abs(logp_old - logp_sampler)) AS logp_diff_mean, "
                 "avg(CASE WHEN exp(logp_old - logp_sampler) BETWEEN 0.9 AND 1.1 THEN 0.0 ELSE 1.0 END) AS out_frac, "
                 "count(*) AS tokens FROM {src} WHERE logp_sampler IS NOT NULL AND logp_old IS NOT NULL "
                 f"AND NOT isnan(logp_old) AND step > (SELECT max(step) FROM {{src}}) - $steps{model} "
                 "GROUP BY position ORDER BY position", {"steps": steps})


def mismatch_by_position(run: str, steps: int) -> tuple[pd.DataFrame, list[str]]:
    """Per token position over the run's last `steps` steps: the sampler's mean log-prob gap to pi_old,
    the share of tokens with w = pi_old / pi_sampler outside [0.9, 1.1], and the tokens counted."""
    v = version(run, "tokens")
    return _by_position(run, int(steps), "source" in _token_columns(run, v), v)


# --- histograms -------------------------------------------------------------------------------

@st.cache_data(ttl=30.0, max_entries=256, show_spinner=False)
def _clip_bounds(run: str, step: int, v: tuple) -> tuple[float, float] | None:
    df, _ = query(run, "histograms", "SELECT clip_low_bound, clip_high_bound FROM {src} WHERE step = $step LIMIT 1",
                  {"step": step})
    if df.empty or df.isna().any(axis=None):
        return None
    return float(df["clip_low_bound"].iloc[0]), float(df["clip_high_bound"].iloc[0])


def logged_clip_bounds(run: str, step: int, fallback: tuple[float, float]) -> tuple[float, float]:
    """The clip range the trainer logged for `step` (tables/histograms), else `fallback` (the config's)."""
    return _clip_bounds(run, int(step), version(run, "histograms")) or fallback


# --- a step's groups in an order (rundir/group_order.py) -----------------------------------------

@st.cache_data(ttl=30.0, max_entries=64, show_spinner=False)
def _columns(run: str, table: str, v: tuple) -> frozenset[str]:
    df, _ = query(run, table, "SELECT * EXCLUDE (filename, file_row_number) FROM {src} LIMIT 0")
    return frozenset(df.columns)


def table_columns(run: str, table: str) -> frozenset[str]:
    """The columns the run's `table` has (the union over its parts; empty when it has none)."""
    if not table_parts(run_path(runs_dir(), run), table)[0]:
        return frozenset()
    return _columns(run, table, version(run, table))


@st.cache_data(ttl=30.0, max_entries=256, show_spinner=False)
def _group_figures(run: str, step: int, v: tuple, tv: tuple) -> tuple[pd.DataFrame, list[str]]:
    columns = set(table_columns(run, "samples"))
    groups, problems = query(run, "samples", group_order.figures_sql(columns), {"step": step})
    if groups.empty:
        return groups, problems
    missing = {k for k in group_order.TOKEN_FIGURES if k not in groups or groups[k].isna().all()}
    sql = group_order.token_figures_sql(set(table_columns(run, "tokens")), missing) if missing else None
    if sql is not None:
        tokens, more = query(run, "tokens", sql, {"step": step})
        groups, problems = group_order.merge_token_figures(groups, tokens), problems + more
    return groups, problems


def group_figures(run: str, step: int) -> tuple[pd.DataFrame, list[str]]:
    """One row per group of `step` with each ordering's figure the run allows (group_order.figures_sql,
    with the tokens table's figures where the samples table lacks them)."""
    return _group_figures(run, int(step), version(run, "samples"), version(run, "tokens"))


@st.cache_data(ttl=30.0, max_entries=64, show_spinner=False)
def _advantages(run: str, step: int, v: tuple) -> tuple[pd.DataFrame, list[str]]:
    columns = table_columns(run, "samples")
    picked = ", ".join(c if c in columns else f"NULL AS {c}" for c in ("length", "truncated", "dropped"))
    return query(run, "samples", f"SELECT advantage, {picked} FROM {{src}} WHERE step = $step", {"step": step})


def step_advantages(run: str, step: int) -> tuple[pd.DataFrame, list[str]]:
    """Each completion of `step`: advantage, length, truncated, dropped (null where the run lacks the column)."""
    return _advantages(run, int(step), version(run, "samples"))
