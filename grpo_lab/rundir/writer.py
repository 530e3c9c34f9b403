"""Buffered, atomic Parquet part files for the run directory's tables.

Rows are buffered in memory and written as one part file per flush (temporary name, then rename),
so a reader only ever sees whole files. Once a table has `compact_every` parts they are merged into
one, so a long run stays a handful of files.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from grpo_lab.rundir.layout import PART_RE, SCHEMA_VERSION, TABLES, RunPaths, part_name, visible_parts

METADATA = {b"grpo_lab.schema_version": str(SCHEMA_VERSION).encode()}


def _write_parquet_atomic(table: pa.Table, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".parquet", dir=path.parent)
    os.close(fd)
    try:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **METADATA})
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_parts(parts: list[Path]) -> pa.Table:
    tables = [pq.read_table(p) for p in parts]
    return pa.concat_tables(tables, promote_options="default")


class TableWriter:
    """One table (a folder of part files). Every row has an integer `step` column."""

    def __init__(self, folder: Path, compact_every: int):
        self.folder = folder
        self.compact_every = compact_every
        self.buffer: list[pa.Table] = []
        folder.mkdir(parents=True, exist_ok=True)

    def append(self, columns: dict[str, list[Any]]) -> None:
        if columns and len(next(iter(columns.values()))):
            self.buffer.append(pa.table(columns))

    def flush(self) -> None:
        if not self.buffer:
            return
        table = pa.concat_tables(self.buffer, promote_options="default")
        self.buffer = []
        steps = table.column("step")
        first, last = pc.min(steps).as_py(), pc.max(steps).as_py()
        _write_parquet_atomic(table, self.folder / part_name(first, last))
        if len(visible_parts(self.folder)) >= self.compact_every:
            self.compact()

    def compact(self) -> None:
        parts = visible_parts(self.folder)
        if len(parts) < 2:
            return
        merged = _read_parts(parts)
        steps = merged.column("step")
        first, last = pc.min(steps).as_py(), pc.max(steps).as_py()
        # The tag keeps the name unique should a part already cover exactly this range.
        _write_parquet_atomic(merged, self.folder / part_name(first, last, tag=f"c{len(parts)}"))
        for p in parts:
            p.unlink(missing_ok=True)

    def recover(self) -> None:
        """Finish what a killed writer left half done: a compaction (or truncation) writes its new
        part before deleting the parts it replaces, so a part hidden inside another one's step
        range holds rows that part already has. Roll forward: delete it, and any .tmp-* file."""
        visible = set(visible_parts(self.folder))
        for path in self.folder.iterdir():
            if (PART_RE.match(path.name) and path not in visible) or path.name.startswith(".tmp-"):
                path.unlink(missing_ok=True)

    def truncate_after(self, step: int) -> None:
        """Drop every row with step > `step` (resume: those steps will be run again)."""
        self.buffer = []
        self.recover()
        parts = visible_parts(self.folder)
        stale = [p for p in parts if int(PART_RE.match(p.name).group(2)) > step]
        if not stale:
            return
        kept = _read_parts(stale).filter(pc.less_equal(pc.field("step"), step))
        if kept.num_rows:
            steps = kept.column("step")
            first = pc.min(steps).as_py()
            _write_parquet_atomic(kept, self.folder / part_name(first, step, tag="r"))
        for p in stale:
            p.unlink(missing_ok=True)


class RunWriter:
    """All tables of one run; `level` is full, scalars or off (config option `logging`)."""

    def __init__(self, paths: RunPaths, level: str = "full", flush_seconds: float = 2.0, compact_every: int = 50):
        self.paths = paths
        self.level = level
        self.flush_seconds = flush_seconds
        names = {"full": TABLES, "scalars": ("scalars", "events"), "off": ()}[level]
        self.tables = {name: TableWriter(paths.table(name), compact_every) for name in names}
        self.last_flush = time.monotonic()

    def log(self, table: str, columns: dict[str, list[Any]]) -> None:
        writer = self.tables.get(table)
        if writer is not None:
            writer.append(columns)

    def maybe_flush(self) -> None:
        if time.monotonic() - self.last_flush >= self.flush_seconds:
            self.flush()

    def flush(self) -> None:
        for writer in self.tables.values():
            writer.flush()
        self.last_flush = time.monotonic()

    def close(self) -> None:
        self.flush()
        for writer in self.tables.values():
            writer.compact()

    def truncate_after(self, step: int) -> None:
        # Every table on disk, not only those this level writes: an earlier attempt may have.
        for name in TABLES:
            folder = self.paths.table(name)
            if folder.is_dir():
                (self.tables.get(name) or TableWriter(folder, 2)).truncate_after(step)
