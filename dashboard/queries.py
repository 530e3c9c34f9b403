"""SQL over the big tables (samples, tokens) with DuckDB, reading only what a view needs.

A run of 10,000 steps holds a million sample rows; the Groups and Compare pages never load them
all: each view asks for one step, one prompt, or an aggregate. Queries name the visible part
files explicitly (rundir.layout.visible_parts), so a compaction in progress never doubles rows.
A damaged part is found, reported and left out; the query is then run over the others.

A group is the rows of one (step, prompt_id) whose sample_idx run 0..G-1 consecutively (a prompt
drawn twice in a step gives two groups). Within one part file a group's first row is at
`file_row_number - sample_idx`, so (filename, that row) identifies a group exactly.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import streamlit as st

from dashboard.data import runs_dir
from rundir.reader import part_identity, run_path, table_parts

_local = threading.local()
_checked: dict[tuple, str | None] = {}  # part identity -> problem (None: footer is readable)


def _con() -> duckdb.DuckDBPyConnection:
    con = getattr(_local, "con", None)
    if con is None:
        con = _local.con = duckdb.connect(config={"threads": 2})
    return con


def _usable_parts(run: str, table: str) -> tuple[list[str], list[str], tuple]:
    """Part files whose footer reads, problems for the others, and a version for caching."""
    folder = run_path(runs_dir(), run)
    paths, problems = table_parts(folder, table)
    files, idents = [], [str(folder)]  # the folder too: caches are keyed by run name and version
    for path in paths:
        ident = part_identity(path)
        if ident is None:
            continue
        if ident not in _checked:
            try:
                pq.read_metadata(path)
                _checked[ident] = None
            except Exception as exc:  # noqa: BLE001 - any unreadable part is reported, not raised
                _checked[ident] = f"{table}/{path.name} could not be read and was skipped ({type(exc).__name__})"
        if _checked[ident]:
            problems.append(_checked[ident])
            continue
        files.append(str(path))
        idents.append(ident)
    return files, problems, tuple(idents)


def version(run: str, table: str) -> tuple:
    return _usable_parts(run, table)[2]


def query(run: str, table: str, sql: str, params: dict[str, Any] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Run `sql` with `{src}` standing for the table's rows (plus `filename`, `file_row_number`).

    If a part turns out damaged beyond its footer, each part is tried alone and the bad ones
    are reported and left out.
    """
    files, problems = _usable_parts(run, table)[:2]
    if not files:
        return pd.DataFrame(), problems
    try:
        return _run(files, sql, params), problems
    except duckdb.Error:
        good = []
        for f in files:
            try:
                _run([f], f"SELECT count(*) FROM {{src}}", None)
                good.append(f)
            except duckdb.Error as exc:
                problems.append(f"{table}/{Path(f).name} could not be read and was skipped "
                                f"({str(exc).splitlines()[0][:160]})")
        if not good:
            return pd.DataFrame(), problems
        try:
            return _run(good, sql, params), problems
        except duckdb.Error as exc:
            return pd.DataFrame(), problems + [f"{table}: query failed ({str(exc).splitlines()[0][:200]})"]


def _run(files: list[str], sql: str, params: dict[str, Any] | None) -> pd.DataFrame:
    src = "read_parquet($files, union_by_name=true, filename=true, file_row_number=true)"
    return _con().execute(sql.replace("{src}", src), {"files": files, **(params or {})}).df()


# --- samples ----------------------------------------------------------------------------------

def _numbered(df: pd.DataFrame) -> pd.DataFrame:
    """Add `group` (0.. in file order) and `occurrence` (0 for a prompt's first group in its step)."""
    if df.empty:
        return df.assign(group=pd.Series(dtype=int), occurrence=pd.Series(dtype=int))
    df = df.sort_values(["filename", "file_row_number"], kind="stable").reset_index(drop=True)
    start = df["file_row_number"] - df["sample_idx"]
    key = df["filename"].astype(str) + ":" + start.astype(str)
    df["group"] = pd.factorize(key)[0]
    firsts = df.drop_duplicates("group")[["group", "step", "prompt_id"]]
    firsts = firsts.assign(occurrence=firsts.groupby(["step", "prompt_id"]).cumcount())
    return df.merge(firsts[["group", "occurrence"]], on="group").drop(columns=["filename", "file_row_number"])


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
    df, problems = query(run, "samples", "SELECT * FROM {src} WHERE step = $step", {"step": step})
    return _numbered(df), problems


def step_samples(run: str, step: int) -> tuple[pd.DataFrame, list[str]]:
    """Every completion of one step, with `group` and `occurrence` columns."""
    return _step_rows(run, int(step), version(run, "samples"))


SUMMARY_SQL = """
WITH groups AS (
    SELECT step, prompt_id, filename, file_row_number - sample_idx AS start, any_value(prompt) AS prompt,
           count(*) AS size, avg(reward) AS mean_reward, stddev_pop(reward) AS std,
           max(advantage) AS a_max, min(advantage) AS a_min, max(abs(advantage)) AS a_abs
    FROM {src} {where} GROUP BY ALL
), numbered AS (
    SELECT * EXCLUDE (filename, start),
           row_number() OVER (PARTITION BY step, prompt_id ORDER BY filename, start) - 1 AS occurrence
    FROM groups
)
SELECT * FROM numbered {having} ORDER BY {order} LIMIT {limit}
"""
SUMMARY_MODES = {  # mode: (filter on groups, order)
    "no_signal": ("WHERE a_abs = 0", "step DESC, prompt_id"),
    "positive": ("", "a_max DESC, step DESC"),
    "negative": ("", "a_min ASC, step DESC"),
    "prompt": ("", "step, occurrence"),
}


@st.cache_data(ttl=10.0, max_entries=64, show_spinner=False)
def _summaries(run: str, mode: str, arg: str, limit: int, v: tuple) -> tuple[pd.DataFrame, list[str]]:
    having, order = SUMMARY_MODES[mode]
    where = "WHERE prompt_id = $arg" if mode == "prompt" else ""
    sql = (SUMMARY_SQL.replace("{where}", where).replace("{having}", having)
           .replace("{order}", order).replace("{limit}", str(int(limit))))
    return query(run, "samples", sql, {"arg": arg} if mode == "prompt" else None)


def group_summaries(run: str, mode: str, arg: str = "", limit: int = 200) -> tuple[pd.DataFrame, list[str]]:
    """Groups across the run, one row each (step, prompt_id, occurrence, mean_reward, std, a_max,
    a_min): mode no_signal (every A = 0), positive / negative (largest A first / smallest A
    first), or prompt (the groups of prompt_id `arg`, by step)."""
    return _summaries(run, mode, arg, limit, version(run, "samples"))


@st.cache_data(ttl=10.0, max_entries=64, show_spinner=False)
def _search(run: str, text: str, limit: int, v: tuple) -> tuple[pd.DataFrame, list[str]]:
    sql = (f"SELECT step, prompt_id, sample_idx, completion, reward, advantage FROM {{src}} "
           f"WHERE contains(lower(completion), lower($text)) ORDER BY step DESC, prompt_id, sample_idx LIMIT {int(limit)}")
    return query(run, "samples", sql, {"text": text})


def search_completions(run: str, text: str, limit: int = 200) -> tuple[pd.DataFrame, list[str]]:
    """Completions containing `text` (case-insensitive, literal: no wildcards), newest first."""
    return _search(run, text, limit, version(run, "samples"))


def prompt_ids(run: str) -> tuple[list[str], list[str]]:
    ids, problems = _distinct(run, "prompt_id", version(run, "samples"))
    return [str(i) for i in ids], problems


# --- tokens -----------------------------------------------------------------------------------


@st.cache_data(ttl=30.0, max_entries=256, show_spinner=False)
def _tokens(run: str, step: int, prompt_id: str, v: tuple) -> tuple[pd.DataFrame, list[str]]:
    df, problems = query(run, "tokens", "SELECT * FROM {src} WHERE step = $step AND prompt_id = $pid",
                         {"step": step, "pid": prompt_id})
    if df.empty:
        return df, problems
    df = df.sort_values(["filename", "file_row_number"], kind="stable").reset_index(drop=True)
    # Rows come group by group, sample by sample, position by position: a new group starts
    # where sample_idx goes down.
    new_group = df["sample_idx"].diff().fillna(-1) < 0
    df["occurrence"] = new_group.cumsum() - 1
    return df.drop(columns=["filename", "file_row_number"]), problems


def group_tokens(run: str, step: int, prompt_id: str, occurrence: int) -> tuple[pd.DataFrame, list[str]]:
    """Token rows of one group ('' when the trainer kept no token detail for it)."""
    if not table_parts(run_path(runs_dir(), run), "tokens")[0]:
        return pd.DataFrame(), []
    df, problems = _tokens(run, int(step), str(prompt_id), version(run, "tokens"))
    if df.empty:
        return df, problems
    return df[df["occurrence"] == occurrence].reset_index(drop=True), problems
