"""SQL over a run's tables with DuckDB: the one way to read samples and tokens (docs/run-directory.md).

`query(run_dir, table, sql)` runs `sql` with `{src}` standing for the table's rows. It names the
visible part files explicitly (rundir.layout.visible_parts), so a compaction in progress never
doubles rows, and a damaged part is found, reported and left out. No Streamlit here: the
dashboard caches on top, scripts and notebooks call it directly.

Groups: `(step, group)` identifies a group exactly. Runs written before schema version 2 have no
`group` column; it is derived here, once, from the order the trainer wrote rows in (a step's rows
are consecutive in one part file; each group starts at sample_idx 0, and in the tokens table at
sample_idx 0, position 0), so every reader above sees the same column.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow.parquet as pq

from grpo_lab.rundir.reader import open_regular, part_identity, table_parts

_local = threading.local()
_schemas: dict[tuple, list[str] | str] = {}  # part identity -> column names, or a problem line

# Where a v1 group starts, per table; the running count of starts within a step is the group index.
_V1_GROUP_START = {"samples": "sample_idx = 0", "tokens": "sample_idx = 0 AND position = 0"}


def _con() -> duckdb.DuckDBPyConnection:
    con = getattr(_local, "con", None)
    if con is None:
        con = _local.con = duckdb.connect(config={"threads": 2})
    return con


def usable_parts(run_dir: Path, table: str) -> tuple[list[Path], list[str], tuple, bool]:
    """(part files whose footer reads, problems for the others, a version for caching, whether
    every part has a `group` column)."""
    paths, problems = table_parts(run_dir, table)
    files, idents, grouped = [], [str(run_dir)], True  # the folder too: caches key on it
    for path in paths:
        ident = part_identity(path)
        if ident is None:
            continue
        if ident not in _schemas:
            try:
                with open_regular(path, run_dir) as fh:  # never a FIFO: pq would wait on it for good
                    _schemas[ident] = pq.read_schema(fh).names
            except Exception as exc:  # noqa: BLE001 - any unreadable part is reported, not raised
                _schemas[ident] = f"{table}/{path.name} could not be read and was skipped ({type(exc).__name__})"
        names = _schemas[ident]
        if isinstance(names, str):
            problems.append(names)
            continue
        files.append(path)
        idents.append(ident)
        grouped = grouped and "group" in names
    return files, problems, tuple(idents), grouped


def version(run_dir: Path, table: str) -> tuple:
    """Changes whenever the table's content may have changed."""
    return usable_parts(run_dir, table)[2]


def query(run_dir: str | Path, table: str, sql: str,
          params: dict[str, Any] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Run `sql` with `{src}` standing for the table's rows (with `group` for samples and tokens).

    If a part turns out damaged beyond its footer, each part is tried alone and the bad ones are
    reported and left out. Never raises on a damaged run.
    """
    run_dir = Path(run_dir)
    files, problems, _, grouped = usable_parts(run_dir, table)
    if not files:
        return pd.DataFrame(), problems
    derive = table in _V1_GROUP_START and not grouped
    try:
        return _run(files, table, derive, sql, params), problems
    except duckdb.Error:
        good = []
        for f in files:
            try:
                _run([f], table, False, "SELECT count(*) FROM {src}", None)
                good.append(f)
            except duckdb.Error as exc:
                problems.append(f"{table}/{f.name} could not be read and was skipped "
                                f"({str(exc).splitlines()[0][:160]})")
        if not good:
            return pd.DataFrame(), problems
        try:
            return _run(good, table, derive, sql, params), problems
        except duckdb.Error as exc:
            return pd.DataFrame(), problems + [f"{table}: query failed ({str(exc).splitlines()[0][:200]})"]


def query_files(files: list[Path], sql: str, params: dict[str, Any] | None = None) -> pd.DataFrame:
    """Run `sql` with `{src}` standing for the rows of `files` (usable_parts' files of one run or of
    several: a sweep's scalars in one query), with `filename` and `file_row_number` columns. Raises
    duckdb.Error when a part is damaged beyond its footer: `query` per run then finds and reports it."""
    return _run(files, "scalars", False, sql, params)


def _run(files: list[Path], table: str, derive: bool, sql: str, params: dict[str, Any] | None) -> pd.DataFrame:
    src = "read_parquet($files, union_by_name=true, filename=true, file_row_number=true)"
    if derive:
        src = f"({_v1_groups(src, table, mixed=any('group' in _schemas.get(part_identity(f), ()) for f in files))})"
    return _con().execute(sql.replace("{src}", src), {"files": [str(f) for f in files], **(params or {})}).df()


def _v1_groups(src: str, table: str, mixed: bool) -> str:
    derived = (f"(sum(({_V1_GROUP_START[table]})::INT) OVER (PARTITION BY step ORDER BY filename, file_row_number "
               "ROWS UNBOUNDED PRECEDING) - 1)")
    if mixed:  # a v1 run resumed by a v2 trainer: keep the written column where there is one
        return f'SELECT * REPLACE (coalesce("group", {derived}) AS "group") FROM {src}'
    return f'SELECT *, {derived} AS "group" FROM {src}'
