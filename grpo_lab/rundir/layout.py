"""Where each file of a run directory lives, and atomic small-file writes."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_lab.rundir.json_file import read_json  # noqa: F401 - the one JSON reader, re-exported for its callers

SCHEMA_VERSION = 3
RUNS_DIR_ENV = "GRPO_LAB_RUNS_DIR"
SOURCES_KEY = "sources"  # config.json: where each option's value came from (not an option itself)
# A run name is one folder name: no separators, no "..", so it cannot lead outside the runs root.
RUN_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
TABLES = ("scalars", "samples", "histograms", "tokens", "events")
PART_RE = re.compile(r"^part-(\d{8})-(\d{8})(?:-[a-z0-9]+)?\.parquet$")
NO_SPACE = os.strerror(errno.ENOSPC)  # "No space left on device"
RESERVE_BYTES = 256 * 1024  # <run>/.reserve: a failed status.json and a traceback in train.log fit many times
FULL_DISK_BYTES = 1 << 20  # less free counts as a full disk: above the reserve, which a dying trainer may have freed


def valid_run_name(name: Any) -> bool:
    return isinstance(name, str) and bool(RUN_NAME_PATTERN.fullmatch(name)) and ".." not in name  # not match: "$" accepts a final newline


def run_folders(runs_dir: str | Path) -> list[os.DirEntry]:
    """The entries of runs_dir that may be runs, sorted by name: the one walk of the runs folder that
    the listing (reader.list_runs), its index (runs_index) and the launch queue share. Kept: a run's name
    and a folder or a symlink (not followed: reader.run_path judges where a link leads). Skipped: files,
    names no run can have (.launcher/, .trash/, .archive/, .sweeps/: no run name starts with "."), entries
    that vanish while looked at. A folder that cannot be listed has none."""
    try:
        with os.scandir(runs_dir) as listing:
            entries = sorted(listing, key=lambda e: e.name)
    except OSError:
        return []
    found = []
    for entry in entries:
        if not valid_run_name(entry.name):
            continue
        try:
            if entry.is_symlink() or entry.is_dir(follow_symlinks=False):
                found.append(entry)
        except OSError:
            continue
    return found


def default_runs_dir() -> str:
    """--runs-dir when not given: $GRPO_LAB_RUNS_DIR, else ./runs."""
    return os.environ.get(RUNS_DIR_ENV) or "runs"


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def status(self) -> Path:
        return self.root / "status.json"

    @property
    def log(self) -> Path:
        return self.root / "train.log"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def reserve(self) -> Path:
        return self.root / ".reserve"

    def table(self, name: str) -> Path:
        return self.root / "tables" / name


def part_name(first_step: int, last_step: int, tag: str = "") -> str:
    return f"part-{first_step:08d}-{last_step:08d}{'-' + tag if tag else ''}.parquet"


def visible_parts(table_dir: Path) -> list[Path]:
    """The part files a reader should read, in step order.

    Compaction writes the merged part before deleting the parts it replaces, so for a moment both
    exist: a part whose step range lies inside another part's range is skipped.
    """
    try:
        names = os.listdir(table_dir)
    except OSError:
        return []
    spans = []
    for name in names:
        m = PART_RE.match(name)
        if m:
            spans.append((int(m.group(1)), int(m.group(2)), name))
    keep = [
        (a, b, name)
        for a, b, name in spans
        if not any((c <= a and b <= d) and (c, d, other) != (a, b, name) and (d - c > b - a or other > name)
                   for c, d, other in spans)
    ]
    return [table_dir / name for _, _, name in sorted(keep)]


def write_json_atomic(path: Path, data: Any) -> None:
    """Readers never see a half-written file: write a temporary file, then rename over."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2, default=str)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class RunLock:
    """`<run>/.lock`, held (flock) by the one trainer writing the run, for its whole life.

    The kernel drops the lock when the process ends, however it ends (SIGKILL included), so a
    stale lock cannot block a resume. Readers never take it; a second trainer is refused.
    """

    def __init__(self, root: Path):
        self.path = Path(root) / ".lock"
        self._fd: int | None = None

    def acquire(self) -> bool:
        """True when this process now holds the lock; False when another one does."""
        # a run folder may come from someone else: a .lock that is a symlink (to a file of the user's)
        # or a FIFO is refused, never truncated or waited on
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, f"{self.path} is not a regular file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        try:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        except OSError:  # a full disk: the caller says so; the lock must not outlive the refusal
            os.close(fd)
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def holder(self) -> str:
        """The pid written by the holder ('' when unknown)."""
        try:
            return self.path.read_text().strip()
        except OSError:
            return ""


def make_reserve(paths: RunPaths) -> None:
    """Set RESERVE_BYTES aside in `<run>/.reserve` while the trainer writes the run. When the disk
    fills, the trainer frees it (free_reserve) and can still write why it stopped; a trainer
    that ends frees it too."""
    with open(paths.reserve, "wb") as fh:
        fh.write(os.urandom(RESERVE_BYTES))  # not zeros: a compressing file system would store those in nothing
        fh.flush()
        os.fsync(fh.fileno())  # allocated now, not at write-back, when the disk may be full


def free_reserve(paths: RunPaths) -> None:
    paths.reserve.unlink(missing_ok=True)


def full_disk(path: Path, exc: BaseException | None = None) -> str:
    """'' unless `path`'s disk is full; then what to tell the user, e.g. "No space left on device
    (120 KB free)". Full: `exc` (or what it was raised from) is ENOSPC or EDQUOT, or less than
    FULL_DISK_BYTES are free. The second test matters: torch.save reports a full disk as a
    RuntimeError with no errno, and a trainer that died cannot say anything at all."""
    code = None
    seen = exc
    while seen is not None and code is None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            code = seen.errno
        seen = seen.__cause__ or seen.__context__
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        free = None
    if code is None and (free is None or free >= FULL_DISK_BYTES):
        return ""
    shown = "" if free is None else f" ({free / 2**20:.1f} MB free)" if free >= 2**20 else f" ({free // 1024} KB free)"
    return os.strerror(code or errno.ENOSPC) + shown
