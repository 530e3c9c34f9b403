"""Reading run directories without trusting them: listing runs, safe paths, incremental tables.

The trainer is the only writer (docs/run-directory.md); a reader must cope with a run that is
being written, was killed half-way, or was damaged on disk. Nothing here raises on a bad run:
each reader returns what it could read plus `problems`, one line a person can act on.

A runs folder may also come from someone else, so a reader opens only regular files whose real
location is inside the run (open_regular): a train.log symlinked to /etc/shadow is not shown, and
a FIFO or device where a part or a log should be is skipped instead of blocking a server thread.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from grpo_lab.rundir import json_file
from grpo_lab.rundir.layout import SCHEMA_VERSION, TABLES, RunPaths, run_folders, valid_run_name, visible_parts
from grpo_lab.rundir.status import read_status_checked

class RunNameError(ValueError):
    """A run name that is not allowed, or that would lead outside the runs folder."""


def check_name(name: Any) -> str:
    if not valid_run_name(name):
        raise RunNameError(f"run name {name!r}: use 1-100 letters, digits, '.', '_', '-' "
                           "(starting with a letter or digit, no '..')")
    return name


def run_path(runs_dir: str | Path, name: str) -> Path:
    """`runs_dir/name`, refused unless it stays inside runs_dir (no '..', no symlink out)."""
    check_name(name)
    root = Path(runs_dir).resolve()
    path = root / name
    if path.resolve().parent != root:
        raise RunNameError(f"run {name!r} points outside the runs folder {root}")
    return path


class UnsafeFileError(OSError):
    """A file a reader will not open: not a regular file, or a symlink that leads out of its run."""


def open_regular(path: str | Path, within: str | Path | None = None):
    """`path` opened for binary reading, when it is a regular file whose real location lies inside
    `within` (default: its own folder). Raises UnsafeFileError, with one line naming the file,
    otherwise; FileNotFoundError when it is missing. Never blocks: a FIFO is opened non-blocking,
    then refused."""
    path = Path(path)
    root = Path(within if within is not None else path.parent).resolve()
    real = path.resolve()
    if not real.is_relative_to(root):
        raise UnsafeFileError(f"{path.name} leads outside {root.name}/ (a symlink?), so it is not read")
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)  # NOFOLLOW: a link swapped in since resolve()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafeFileError(f"{path.name} is not a regular file (a FIFO or a device?), so it is not read")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def unsafe_file(path: str | Path, within: str | Path | None = None) -> str | None:
    """The one line open_regular would refuse `path` with; None when it is fine or missing."""
    try:
        open_regular(path, within).close()
    except UnsafeFileError as exc:
        return str(exc)
    except OSError:
        return None
    return None


# --- runs -------------------------------------------------------------------------------------


@dataclass
class RunInfo:
    """One run directory as a listing sees it: status.json and config.json, both optional."""

    name: str
    path: Path
    status: dict[str, Any] | None
    config: dict[str, Any] | None
    problems: list[str] = field(default_factory=list)

    def get(self, key: str, default: Any = None) -> Any:
        """A field from status.json, else config.json (status copies name/algo/model/task)."""
        for source in (self.status, self.config):
            if source and source.get(key) is not None:
                return source[key]
        return default

    @property
    def algo(self) -> str:
        return str(self.get("algo", "?"))

    @property
    def state(self) -> str:
        return str(self.get("state", "unknown"))

    @property
    def step(self) -> int:
        return _int(self.get("step"), 0)

    @property
    def total_steps(self) -> int:
        return _int(self.get("total_steps", self.get("max_steps")), 0)

    @property
    def error(self) -> str | None:
        error = (self.status or {}).get("error")
        return None if error is None else str(error)

    @property
    def started_at(self) -> float | None:
        return _float(self.get("started_at"))

    @property
    def updated_at(self) -> float | None:
        return _float(self.get("updated_at"))


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def read_run(runs_dir: str | Path, name: str) -> RunInfo:
    if (link := linked_run(runs_dir, name)) is not None:
        return link
    path = run_path(runs_dir, name)
    paths = RunPaths(path)
    if not path.is_dir():
        return RunInfo(name, path, None, None, [f"no run directory {path}"])
    status, status_problem = read_status_checked(paths.status)
    config, config_problem = json_file.read(paths.config)
    unsafe = {f.name: line for f in (paths.log, paths.status, paths.config) if (line := unsafe_file(f, path))}
    return run_info(name, path, (status, status_problem), (config, config_problem), {**unsafe, **table_files(path)})


def linked_run(runs_dir: str | Path, name: str) -> RunInfo | None:
    """A run folder that is a symlink (to itself, to another run, out of the runs folder), listed with
    why it is not read: a run's files are read where they lie, inside the runs folder, and a link would
    show one run twice or another folder's files as a run. None for anything else."""
    path = Path(runs_dir) / name
    if not path.is_symlink():
        return None
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return RunInfo(name, path, None, None, [f"{name} is a symlink (to {target[:120]}), not a run folder, so it is "
                                            "not read; move or copy the run here instead"])


def table_files(path: Path) -> dict[str, str]:
    """The problem line of a run whose tables/ or tables/scalars is a file, not a folder of Parquet parts
    (the run would read as having no steps, silently); keyed as run_info's `unsafe`."""
    for where in ("tables", "tables/scalars"):
        try:
            st = os.lstat(path / where)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            kind = "a file" if stat.S_ISREG(st.st_mode) else "not a folder"
            return {where: f"{where} is {kind}, not a folder of Parquet parts, so the run's steps are not read"}
    return {}


def run_info(name: str, path: Path, status: tuple[dict | None, str | None], config: tuple[dict | None, str | None],
             unsafe: dict[str, str]) -> RunInfo:
    """The RunInfo of a run whose status.json and config.json were read ((mapping or None, why not read),
    as read_status_checked and json_file.read give them) and whose files in `unsafe` (file name -> the
    line open_regular refuses it with) were found unsafe: its problem lines, each said once."""
    (status, status_problem), (config, config_problem) = status, config
    # a file refused is not read: its content (through a symlink out of the run) is not the run's
    status = None if "status.json" in unsafe else status
    config = None if "config.json" in unsafe else config
    problems = list(unsafe.values())
    # why each was not read, once: unsafe (a symlink out, a FIFO), else too large, too deep, not JSON
    if status is None and "status.json" not in unsafe:
        problems.append(status_problem or "status.json is missing: the run may still be starting, or never started")
    elif status is not None and status_problem:  # read, with fields left out (status.checked_fields)
        problems.append(status_problem)
    if config is None and "config.json" not in unsafe:
        problems.append(config_problem or "config.json is missing")
    written = _int((status or {}).get("schema_version"), SCHEMA_VERSION)
    if written > SCHEMA_VERSION:
        problems.append(f"written by a newer version of grpo-lab (run-directory schema {written}; this one reads up "
                        f"to {SCHEMA_VERSION}): upgrade grpo-lab to open it")
    return RunInfo(name, path, status, config, problems)


def numeric_scalars(table: pa.Table) -> tuple[pa.Table, list[str]]:
    """The scalars table with only the columns the trainer writes there: numbers (every metric a float,
    step an integer; null where a step has none). Any other column (text, a list, a struct, planted or
    from another tool) is left out with one line naming it, so no page turns '<b>' or [1.0] into a
    number; a step column that is not whole numbers leaves no rows. Reads the schema only.

    >>> kept, problems = numeric_scalars(pa.table({"step": [1], "reward/mean": ["x"]}))
    >>> kept.column_names, problems
    (['step'], ['tables/scalars: column reward/mean holds string, not numbers as the trainer writes them; left out'])
    """
    bad = [f for f in table.schema if not (pa.types.is_integer(f.type) or pa.types.is_floating(f.type)
                                           or pa.types.is_boolean(f.type) or pa.types.is_null(f.type))]
    problems = [f"tables/scalars: column {f.name[:80]} holds {str(f.type)[:40]}, not numbers as the trainer writes "
                "them; left out" for f in bad]
    kept = table.drop_columns([f.name for f in bad]) if bad else table
    if "step" in kept.column_names and not pa.types.is_integer(kept.schema.field("step").type):
        problems.append(f"tables/scalars: column step holds {kept.schema.field('step').type}, not whole numbers; "
                        "no step is shown")
        kept = kept.slice(0, 0)
    return kept, problems


def list_runs(runs_dir: str | Path) -> list[RunInfo]:
    """Every run directory under runs_dir, newest first; entries that are not runs are skipped."""
    runs = []
    for entry in run_folders(runs_dir):
        try:
            runs.append(read_run(runs_dir, entry.name))
        except (OSError, RunNameError):
            continue
        except Exception as exc:  # noqa: BLE001 - one run's files never take the listing of the others down
            runs.append(unreadable(entry.name, Path(runs_dir) / entry.name, exc))
    runs.sort(key=newest_first, reverse=True)
    return runs


def newest_first(run: RunInfo) -> tuple[float, str]:
    """A listing's sort key (sorted in reverse): the latest start first, then by name."""
    return run.started_at or 0.0, run.name


def unreadable(name: str, path: Path, exc: BaseException) -> RunInfo:
    """A run whose files raised `exc` while read: listed, with that as its problem line."""
    detail = str(exc).splitlines()[0][:160] if str(exc) else ""
    return RunInfo(name, path, None, None, [f"could not be read ({type(exc).__name__}: {detail})"])


LOG_TAIL_BYTES = 64_000  # a log shown on a page: only its end is read, however large the file


def tail_checked(path: Path, lines: int = 40, max_bytes: int = LOG_TAIL_BYTES,
                 within: Path | None = None) -> tuple[str, str | None]:
    """(the last `lines` lines of a text file, reading at most max_bytes; a problem line or None).
    Missing: ('', None). Not a regular file inside `within` (default: its folder): ('', why)."""
    try:
        with open_regular(path, within) as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read(max_bytes)
    except UnsafeFileError as exc:
        return "", str(exc)
    except OSError:
        return "", None
    text = data.decode("utf-8", errors="replace").replace("\r", "\n")
    return "\n".join(text.splitlines()[-lines:]), None


def tail(path: Path, lines: int = 40, max_bytes: int = LOG_TAIL_BYTES) -> str:
    """tail_checked's text alone ('' when missing or refused: read_run reports why)."""
    return tail_checked(path, lines, max_bytes)[0]


# --- tables -----------------------------------------------------------------------------------


def part_identity(path: Path) -> tuple | None:
    """(name, size, mtime, inode): a part is immutable, so a new identity means new content."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (path.name, st.st_size, st.st_mtime_ns, st.st_ino)


def not_yet(problem: str) -> bool:
    """Whether a problem line of `table_parts` only says the table has not been written yet: normal
    for a run still warming up or waiting (a reader may say so calmly rather than warn)."""
    return problem.startswith("table ") and problem.endswith(("does not exist yet)", "has no data yet"))


def table_parts(run_dir: Path, table: str) -> tuple[list[Path], list[str]]:
    """Visible parts of a table, and a problem line when the table is missing or empty."""
    folder = RunPaths(Path(run_dir)).table(table)
    if not folder.is_dir():
        return [], [f"table {table!r} is missing (tables/{table}/ does not exist yet)"]
    parts, problems = [], []
    for part in visible_parts(folder):
        if (line := unsafe_file(part, run_dir)) is not None:
            problems.append(f"{table}/{line}; skipped")
        else:
            parts.append(part)
    if not parts and not problems:
        return [], [f"table {table!r} has no data yet"]
    return parts, problems


def read_part(path: Path, columns: list[str] | None = None) -> pa.Table:
    """One part file, opened with open_regular (checked again here: it may have been swapped)."""
    with open_regular(path) as fh:
        part = pq.ParquetFile(fh)
        names = part.schema_arrow.names
        return part.read(columns=None if columns is None else [c for c in columns if c in names])


@dataclass
class TableRead:
    table: pa.Table | None  # None: nothing readable
    problems: list[str]
    version: tuple  # changes whenever the content may have changed
    new_rows: int  # rows read from parts not seen before (0: nothing new)


class TableReader:
    """One table of one run, read incrementally: each call reads only parts it has not seen.

    Parts are immutable (written under a temporary name, then renamed), so a part is known by its
    identity; compaction and resume replace parts by new ones, which are read once. A part that
    cannot be read (truncated, corrupt, vanished) is reported and skipped; it is tried again on
    the next call in case it was being replaced.
    """

    def __init__(self, run_dir: Path, table: str, columns: list[str] | None = None):
        if table not in TABLES:
            raise ValueError(f"table: must be one of {TABLES}, got {table!r}")
        self.run_dir, self.table, self.columns = Path(run_dir), table, columns
        self._parts: dict[tuple, pa.Table] = {}
        self._order: tuple = ()
        self._joined: pa.Table | None = None
        self._lock = threading.Lock()

    def read(self) -> TableRead:
        with self._lock:
            paths, problems = table_parts(self.run_dir, self.table)
            idents, new_rows, parts = [], 0, {}
            for path in paths:
                ident = part_identity(path)
                if ident is None:
                    continue  # vanished between listing and stat: compaction; the merged part is listed
                if ident in self._parts:
                    parts[ident] = self._parts[ident]
                else:
                    try:
                        parts[ident] = read_part(path, self.columns)
                        new_rows += parts[ident].num_rows
                    except Exception as exc:  # noqa: BLE001 - any unreadable part is reported, not raised
                        problems.append(f"{self.table}/{path.name} could not be read and was skipped "
                                        f"({type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else 'no detail'})")
                        continue
                idents.append(ident)
            order = tuple(idents)
            if order != self._order:
                self._parts, self._order = parts, order
                self._joined = _concat(list(parts.values()))
            return TableRead(self._joined, problems, order, new_rows)


def _concat(tables: list[pa.Table]) -> pa.Table | None:
    if not tables:
        return None
    if len(tables) == 1:
        return tables[0]
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        # Incompatible schemas (a damaged or foreign part): keep the columns they share.
        common = [n for n in tables[0].schema.names if all(n in t.schema.names for t in tables)]
        return pa.concat_tables([t.select(common).cast(tables[0].select(common).schema, safe=False)
                                 for t in tables])
