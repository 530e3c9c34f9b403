"""The runs of a runs folder, read once and then kept up to date from their files' identities.

list_runs (rundir/reader.py) reads every run's status.json and config.json: at 10,000 runs that is
20,000 files, seconds of work, and the Runs page refreshes every 2 s while a run trains. An index
reads a run once; afterwards a refresh only looks: one os.scandir of the folder, then an lstat of
each run folder and of its status.json, config.json and annotations.json. A run whose identities
(inode, size, mtime, type) are all unchanged is not read again; one whose file was written within
RACY_S of the look is read again the next time as well, since a file system stamps times with a
coarse clock and two writes in one tick can leave the same mtime and size (git's "racy" entries).

What a refresh lists is list_runs' listing, exactly: the same runs in the same order, each the
RunInfo read_run gives, with the same problem lines. Everything is read as input (json_file's
bounded reader); a run with anything unusual among its files (a symlink, a FIFO, a folder that is a
link) is read by read_run itself, every time, as list_runs reads it. The status of a run whose
trainer was alive at the last look is judged again at each refresh (status.judged): a trainer that
died writes nothing, and its run reads as failed as soon as it is gone.

The index also holds each run's tags (annotations.json, checked as annotations.read checks them),
which the Runs page filters on. What it returns is shared: treat the RunInfo objects, their
mappings and the tags as read-only.

>>> import tempfile, json, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> (folder / "a").mkdir()
>>> _ = (folder / "a" / "status.json").write_text(json.dumps({"state": "finished", "step": 3}))
>>> index = RunsIndex(folder)
>>> [(r.name, r.state, r.step) for r in index.refresh().runs]
[('a', 'finished', 3)]
>>> index.refresh().version == index.refresh().version  # nothing changed: nothing read again
True
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import stat
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_lab.rundir import annotations, json_file
from grpo_lab.rundir.layout import run_folders
from grpo_lab.rundir.reader import (RunInfo, RunNameError, linked_run, newest_first, read_run, run_info, table_files,
                                    unreadable)
from grpo_lab.rundir.status import ACTIVE_STATES, judged, read_written

WATCHED = ("status.json", "config.json", annotations.FILE)  # the files of a run the listing reads
RACY_S = 2.0  # a file written this close to a look is read again at the next one (coarse file clocks)
LOOK_EVERY = 8  # a quiet run's files are looked at every this many refreshes (a write in place shows then)
MAX_FOLDERS = 16  # indexes kept by index(): a dashboard reads one runs folder, tests many


@dataclass(frozen=True)
class Listing:
    """A runs folder as a refresh found it: `runs` newest first (list_runs' order), `tags` per run
    that has any, and `version`, which changes whenever anything in either changed."""

    runs: tuple[RunInfo, ...] = ()
    tags: dict[str, tuple[str, ...]] = field(default_factory=dict)
    version: int = 0

    @functools.cached_property
    def table(self) -> pd.DataFrame:
        """One row per run, in listing order, of what a page filters and counts by: name, state,
        algo and sweep (None where the run does not say), variant ('' for none), tags (a tuple).
        Made once per listing, however many pages and reruns read it."""
        return pd.DataFrame({
            "name": [r.name for r in self.runs],
            "state": [r.state for r in self.runs],
            "algo": [None if (a := r.get("algo")) is None else str(a) for r in self.runs],
            "sweep": [str(c["sweep"]) if (c := r.config or {}).get("sweep") else None for r in self.runs],
            "variant": [str((r.config or {}).get("variant") or "") for r in self.runs],
            "tags": [self.tags.get(r.name, ()) for r in self.runs],
        }, columns=["name", "state", "algo", "sweep", "variant", "tags"])

    @functools.cached_property
    def active(self) -> tuple[RunInfo, ...]:
        """The runs whose state is active (starting, running), in listing order."""
        return tuple(r for r in self.runs if r.state in ACTIVE_STATES)


@dataclass
class _Run:
    ident: tuple  # the identities of the run folder and its WATCHED files when read
    info: RunInfo
    written: dict[str, Any] | None  # status.json as written, before judged()
    tags: tuple[str, ...]
    recheck: bool  # read again at every refresh: racy, or unusual files (read_run's own way)
    alive: bool  # its trainer was alive at the last look: its files are looked at, its status judged, each time
    turn: int  # the refresh (modulo LOOK_EVERY) at which its files are looked at while it is quiet


def _ident(st: os.stat_result) -> tuple:
    return st.st_ino, st.st_size, st.st_mtime_ns, stat.S_IFMT(st.st_mode)


def _look(folder: str, name: str) -> tuple | None:
    try:
        return _ident(os.lstat(f"{folder}/{name}"))
    except OSError:  # missing (or vanished): as a reader finds it
        return None


class RunsIndex:
    """One runs folder's runs, kept up to date by refresh(); safe to share between threads.

    Each refresh lstats every run folder: the trainer, the dashboard and every writer of this
    package replace a file by renaming a new one over it, which changes its folder's mtime, so such
    a write shows at the next refresh. A write in place (a person's editor, `echo >`) changes only
    the file: a quiet run's files are looked at every LOOK_EVERY refreshes, an active run's each
    time, so that shows within LOOK_EVERY refreshes (seconds) while 10,000 quiet runs cost 10,000
    lstats a refresh instead of 40,000.
    """

    def __init__(self, runs_dir: str | Path):
        self.root = Path(runs_dir).resolve()
        self._runs: dict[str, _Run] = {}
        self._listing = Listing()
        self._refreshed = float("-inf")  # time.monotonic() of the last refresh
        self._ticks = 0
        self._lock = threading.Lock()
        self.reads = 0  # runs read so far (a test counts what a refresh read)

    def listing(self, max_age: float = 0.0) -> Listing:
        """The listing as of at most `max_age` seconds ago (0: refreshed now)."""
        with self._lock:
            if time.monotonic() - self._refreshed > max_age:
                with _no_collection():
                    self._refresh()
                self._refreshed = time.monotonic()  # (a first read of 10,000 runs takes a while)
            return self._listing

    def refresh(self) -> Listing:
        return self.listing(0.0)

    def forget(self) -> None:
        """The next listing looks again, whatever its max_age (a run was just moved by this process)."""
        self._refreshed = float("-inf")

    def _refresh(self) -> None:
        started = time.time()
        self._ticks += 1
        tick = self._ticks % LOOK_EVERY
        folder = str(self.root)
        old, new, changed = self._runs, {}, False
        for entry in run_folders(folder):  # run names only: never .launcher/, .trash/, .archive/
            name = entry.name
            run = old.get(name)
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            link = stat.S_ISLNK(st.st_mode)
            if not link and not stat.S_ISDIR(st.st_mode):
                continue
            here = _ident(st)
            if run is not None and not (run.recheck or run.alive or run.turn == tick) and run.ident[0] == here:
                new[name] = run  # quiet, and nothing renamed into its folder since it was read
                continue
            path = f"{folder}/{name}"
            ident = (here, *(_look(path, f) for f in WATCHED))
            if run is None or run.recheck or run.ident != ident:
                fresh = self._read(name, ident, link, started)
                if fresh is None:
                    continue
                if run is not None and (fresh.info, fresh.tags) == (run.info, run.tags):
                    fresh.info = run.info  # read again, found the same: the listing stays as it is
                else:
                    changed = True
                run = fresh
            elif run.alive:  # nothing written since, but its trainer may have ended
                status = judged(run.written, f"{path}/status.json")
                if status != run.info.status:
                    info = run.info
                    run = _Run(ident, RunInfo(name, info.path, status, info.config, info.problems), run.written,
                               run.tags, run.recheck, status["alive"], run.turn)
                    changed = True
            new[name] = run
        changed = changed or new.keys() != old.keys()
        self._runs = new
        if changed:
            runs = sorted(new.values(), key=lambda r: newest_first(r.info), reverse=True)
            self._listing = Listing(tuple(r.info for r in runs), {r.info.name: r.tags for r in runs if r.tags},
                                    self._listing.version + 1)

    def _read(self, name: str, ident: tuple, link: bool, now: float) -> _Run | None:
        """The run as read_run reads it (None: not a run, as list_runs skips it)."""
        self.reads += 1
        path = self.root / name
        where = f"{self.root}/{name}"
        here, *files = ident
        logged = _look(where, "train.log")
        plain = (not link and all(f is None or stat.S_ISREG(f[3]) for f in files)
                 and (logged is None or stat.S_ISREG(logged[3])))
        recent = any(f is not None and f[2] >= (now - RACY_S) * 1e9 for f in (here, *files))
        written = None
        try:
            if plain:  # nothing to refuse: read_run's reads without its checks of links and FIFOs
                written, status_problem = read_written(f"{where}/status.json") if files[0] else (None, None)
                status = judged(written, f"{where}/status.json") if written is not None else None
                config = json_file.read(f"{where}/config.json") if files[1] else (None, None)
                info = run_info(name, path, (status, status_problem), config, table_files(path))
            elif link:  # listed with why it is not read, as list_runs lists it
                info, status = linked_run(self.root, name), None
            else:
                info = read_run(self.root, name)
                status = info.status
            tags = annotations.read(path).tags if files[2] else ()
        except (OSError, RunNameError):
            return None
        except Exception as exc:  # noqa: BLE001 - one run's files never take the listing of the others down
            info, status, tags = unreadable(name, path, exc), None, ()
        alive = plain and bool((status or {}).get("alive"))
        return _Run(ident, info, written, tags, recheck=recent or not plain, alive=alive, turn=self.reads % LOOK_EVERY)


@contextlib.contextmanager
def _no_collection():
    """No garbage collection while a refresh reads: a first read makes 20,000 mappings, which set off
    collections that walk every object the process holds, again and again (a third of the time; the
    mappings hold no cycles to collect)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


_INDEXES: OrderedDict[Path, RunsIndex] = OrderedDict()
_INDEXES_LOCK = threading.Lock()


def index(runs_dir: str | Path) -> RunsIndex:
    """This process's index of `runs_dir` (the last MAX_FOLDERS folders asked for are kept)."""
    key = Path(runs_dir).resolve()
    with _INDEXES_LOCK:
        found = _INDEXES.pop(key, None) or RunsIndex(key)
        _INDEXES[key] = found
        while len(_INDEXES) > MAX_FOLDERS:
            _INDEXES.popitem(last=False)
        return found


def listing(runs_dir: str | Path, max_age: float = 0.0) -> Listing:
    """The runs of `runs_dir` as of at most `max_age` seconds ago, newest first (list_runs' listing)."""
    return index(runs_dir).listing(max_age)


def forget_all() -> None:
    """Drop every index: the next listing reads each run again (a benchmark's cold start)."""
    with _INDEXES_LOCK:
        _INDEXES.clear()
