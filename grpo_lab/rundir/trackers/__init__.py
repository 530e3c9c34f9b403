"""The run as trackers see it (`report_to`, TRL's option): TensorBoard event files, wandb, trackio.

The run folder stays the record; a tracker gets a copy of what the writer writes: every scalars row
under its registered names at its step (and `time` as the event's time), the config once, and for
wandb and trackio each step's completions as a table. Each tracker runs in a thread of its own behind
a bounded queue: its import, its start (wandb's takes seconds) and every call happen there, so a slow
tracker drops rows (one warning) rather than slow a step, and a missing or failing one warns once and
stops while the run goes on. Rank 0 alone reports: the other ranks have no writer.

The modules beside this one hold each tracker's sink (what writes) and its reader (what reads back,
with the tracker's own reader: TensorBoard's EventAccumulator, wandb's offline run file, trackio's
local store); grpo_lab/rundir/importers/trackers.py turns what a reader gives into a run directory.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

# The samples columns a completions table keeps (TRL's table: prompt, completion, each reward, advantage),
# with the group key: a group is (step, group); prompt_id and sample_idx say which prompt and which answer.
TABLE_COLUMNS = ("step", "group", "prompt_id", "sample_idx", "prompt", "completion", "reward", "advantage")
INSTALL = "pip install -r requirements-trackers.txt"
QUEUE_ROWS = 1024  # rows a tracker may fall behind by before the next ones are dropped for it
CLOSE_SECONDS = 30.0  # at the end (status.json final already), how long a tracker may take to write what it has


class Sink(Protocol):
    """What one tracker writes; opened with the run's config (`open_sink(run_dir, run_name, config)` of
    its module), in the tracker's thread, where every method is called too."""

    def scalars(self, step: int, time: float, values: dict[str, float]) -> None: ...
    def table(self, step: int, columns: dict[str, list]) -> None: ...
    def close(self) -> None: ...


def table_columns(samples: dict[str, list]) -> dict[str, list]:
    """A samples table's rows as a completions table: TABLE_COLUMNS and each reward's column.

    >>> table_columns({"step": [1], "group": [0], "prompt_id": ["7"], "sample_idx": [0], "prompt": ["2+2="],
    ...                "completion": ["4"], "reward": [1.0], "advantage": [0.5], "rewards/correctness": [1.0],
    ...                "ratio_mean": [1.0]})["rewards/correctness"]
    [1.0]
    """
    keep = [c for c in TABLE_COLUMNS if c in samples] + sorted(c for c in samples if c.startswith("rewards/"))
    return {c: list(samples[c]) for c in keep}


def sink_factory(name: str, run_dir: Path, run_name: str, config: dict[str, Any]) -> Callable[[], Sink]:
    """How tracker `name` (config.TRACKERS) is opened; imported lazily: the base install has none of them."""
    def open_sink() -> Sink:
        if name == "tensorboard":
            from grpo_lab.rundir.trackers import tensorboard_files as module  # noqa: PLC0415
        elif name == "wandb":
            from grpo_lab.rundir.trackers import wandb_files as module  # noqa: PLC0415
        else:
            from grpo_lab.rundir.trackers import trackio_store as module  # noqa: PLC0415
        return module.open_sink(run_dir, run_name, config)
    return open_sink


class _Tracker:
    """One tracker's thread and queue. Everything it calls may fail: it says so once and stops."""

    def __init__(self, name: str, open_sink: Callable[[], Sink], log: logging.Logger, rows: int):
        self.name, self.log = name, log
        self.queue: queue.Queue = queue.Queue(maxsize=rows)
        self.dropped = 0
        self.dead = False
        self.thread = threading.Thread(target=self._work, args=(open_sink,), name=f"report-to-{name}", daemon=True)
        self.thread.start()

    def put(self, item: tuple) -> None:
        if self.dead:
            return
        try:
            self.queue.put_nowait(item)
        except queue.Full:
            if not self.dropped:
                self.log.warning("report_to: %s is falling behind (%d rows waiting); rows are left out of it "
                                 "while it catches up (the run folder has every one)", self.name, self.queue.qsize())
            self.dropped += 1

    def _work(self, open_sink: Callable[[], Sink]) -> None:
        sink = None
        try:
            sink = open_sink()
            while (item := self.queue.get()) is not None:
                getattr(sink, item[0])(*item[1:])
        except ImportError as exc:
            self._fail(f"needs the {exc.name or 'tracker'} package ({INSTALL})")
        except Exception as exc:  # noqa: BLE001 - a tracker's failure is never the run's
            self._fail(f"{type(exc).__name__}: {exc}")
        finally:
            if sink is not None:
                try:
                    sink.close()
                except Exception as exc:  # noqa: BLE001
                    self._fail(f"could not close: {type(exc).__name__}: {exc}")

    def _fail(self, why: str) -> None:
        if not self.dead:
            self.dead = True
            self.log.warning("report_to: %s %s; the run goes on without it (the run folder is complete)",
                             self.name, why)
        while True:  # what was queued is not for anyone now; a put after this one sees `dead`
            try:
                self.queue.get_nowait()
            except queue.Empty:
                break

    def close(self, seconds: float) -> None:
        if not self.dead:
            try:
                self.queue.put(None, timeout=seconds)
            except queue.Full:
                pass
        self.thread.join(seconds)
        if self.thread.is_alive():
            self.log.warning("report_to: %s did not finish writing within %.0f s; left behind", self.name, seconds)
        elif self.dropped:
            self.log.warning("report_to: %s left out %d rows it was too slow for", self.name, self.dropped)


class Reporter:
    """The trackers of one run (each opened with the config): `scalars` and `samples` as the writer gets them."""

    def __init__(self, sinks: dict[str, Callable[[], Sink]], log: logging.Logger, rows: int = QUEUE_ROWS):
        self.log = log
        self.trackers = [_Tracker(name, open_sink, log, rows) for name, open_sink in sinks.items()]
        self.closed = self.broken = False

    def _put(self, *item) -> None:
        for tracker in self.trackers:
            tracker.put(item)

    def send(self, table: str, columns: dict[str, list]) -> None:
        """A row the writer was given, to every tracker: scalars and samples (the others have no place there).
        Nothing here may stop the run: a row that cannot be sent warns once."""
        try:
            if table == "scalars":
                self.scalars(columns)
            elif table == "samples":
                self.samples(columns)
        except Exception as exc:  # noqa: BLE001
            if not self.broken:
                self.broken = True
                self.log.warning("report_to: a %s row could not be sent (%s: %s); the run folder has it",
                                 table, type(exc).__name__, exc)

    def scalars(self, row: dict[str, list]) -> None:
        """One scalars row as the writer takes it (columns of one value): step, time, then the figures."""
        values = {k: float(v[0]) for k, v in row.items() if k not in ("step", "time")}
        when = float(row["time"][0]) if "time" in row and row["time"][0] is not None else math.nan
        self._put("scalars", int(row["step"][0]), when, values)

    def samples(self, columns: dict[str, list]) -> None:
        if columns.get("step"):
            self._put("table", int(columns["step"][0]), table_columns(columns))

    def close(self, seconds: float = CLOSE_SECONDS) -> None:
        """Ends every tracker (each given `seconds` to write what it has); a second call does nothing."""
        if not self.closed:
            self.closed = True
            for tracker in self.trackers:
                tracker.close(seconds)


class ReportingWriter:
    """A run writer whose scalars and samples rows also go to the trackers (every other call is the writer's)."""

    def __init__(self, writer, reporter: Reporter):
        self.writer, self.reporter = writer, reporter

    def __getattr__(self, name: str):  # level, tables, paths, flush, maybe_flush, truncate_after: the writer's
        return getattr(self.writer, name)

    def log(self, table: str, columns: dict[str, list]) -> None:
        self.writer.log(table, columns)
        self.reporter.send(table, columns)

    def close(self) -> None:
        self.writer.close()  # the trackers end in end_reporting, once the run's status is final


def reporting(writer, targets: tuple[str, ...], *, run_dir: Path, run_name: str, config: dict[str, Any],
              log: logging.Logger):
    """`writer` as it is without targets; else a ReportingWriter feeding them (each opened with `config`)."""
    if not targets:
        return writer
    reporter = Reporter({name: sink_factory(name, run_dir, run_name, config) for name in targets}, log)
    return ReportingWriter(writer, reporter)


def end_reporting(writer) -> None:
    """The trackers' end, after the run's own (its status final, finished or failed): what they were given
    written, each within CLOSE_SECONDS. Nothing for a writer without trackers; a second call does nothing."""
    if isinstance(writer, ReportingWriter):
        writer.reporter.close()
