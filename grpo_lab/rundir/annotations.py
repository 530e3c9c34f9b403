"""annotations.json: a person's tags and note on a run (docs/run-directory.md).

The one file of a run directory that the trainer never writes: the dashboard's Runs page writes it,
whole and atomically (a temporary file renamed over, under `.annotations.lock` so two pages saving at
once write one after the other, then read back: a save says it is done only when the file on disk
holds it), and the Runs and Compare pages read it. A run folder may come from someone
else, so what is read back goes through the same checks as what a person types (check_tags,
check_note), and a file that fails them reads as no annotations plus one problem line.

>>> check_tags("beta=0.04, baseline  baseline")
['beta=0.04', 'baseline']
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_lab.rundir import json_file
from grpo_lab.rundir.layout import write_json_atomic
from grpo_lab.rundir.reader import UnsafeFileError, open_regular

FILE = "annotations.json"
LOCK = ".annotations.lock"
LOCK_WAIT_S = 5.0  # another save of the same run takes milliseconds; longer means something is stuck
MAX_TAGS = 12
MAX_TAG_CHARS = 32
MAX_NOTE_CHARS = 2000
MAX_FILE_BYTES = 64_000  # a note of 2000 characters fits many times; a larger file is not ours
# \w is Unicode: a tag may be Chinese. '=' so a grid point can be a tag (beta=0.04); no spaces or commas,
# which separate tags where they are typed.
TAG = re.compile(r"[\w.+:=/-]{1,%d}" % MAX_TAG_CHARS)
TAGS_ALLOWED = (f"up to {MAX_TAGS} tags, each 1-{MAX_TAG_CHARS} letters, digits or . _ - + : = / "
                "(separated by commas or spaces)")


class AnnotationError(ValueError):
    """Tags or a note that are not allowed; the message names the field and what is allowed."""


@dataclass(frozen=True)
class Annotations:
    tags: tuple[str, ...] = ()
    note: str = ""
    problems: list[str] = field(default_factory=list, compare=False)


def check_tags(tags: Any) -> list[str]:
    """Tags from typed text ("a, b c") or a list, checked; duplicates dropped, order kept."""
    if isinstance(tags, str):
        tags = re.split(r"[,\s]+", tags.strip())
    if not isinstance(tags, (list, tuple)):
        raise AnnotationError(f"tags: {TAGS_ALLOWED}; got {type(tags).__name__}")
    out: list[str] = []
    for tag in tags:
        if tag == "":
            continue
        if not isinstance(tag, str) or not TAG.fullmatch(tag):
            raise AnnotationError(f"tags: {TAGS_ALLOWED}; got {str(tag)[:40]!r}")
        if tag not in out:
            out.append(tag)
    if len(out) > MAX_TAGS:
        raise AnnotationError(f"tags: {TAGS_ALLOWED}; got {len(out)} tags")
    return out


def check_note(note: Any) -> str:
    """A note: text of at most MAX_NOTE_CHARS characters, no control characters but newlines and tabs."""
    if note is None:
        return ""
    if not isinstance(note, str):
        raise AnnotationError(f"note: must be text, got {type(note).__name__}")
    if len(note) > MAX_NOTE_CHARS:
        raise AnnotationError(f"note: at most {MAX_NOTE_CHARS} characters, got {len(note)}")
    if any(ord(c) < 32 and c not in "\n\t" for c in note):
        raise AnnotationError("note: text without control characters (newlines and tabs are fine)")
    return note.strip()


def read(run_dir: str | Path) -> Annotations:
    """A run's annotations; none (and no problem) when the file is missing. Opened with open_regular,
    so a symlink out of the run or a FIFO is refused, and checked as typed input is."""
    path = Path(run_dir) / FILE
    try:
        with open_regular(path, run_dir) as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return Annotations()
    except UnsafeFileError as exc:
        return Annotations(problems=[str(exc)])
    except OSError as exc:
        return Annotations(problems=[f"{FILE} could not be read ({exc.strerror or exc})"])
    try:
        if len(raw) > MAX_FILE_BYTES:
            raise AnnotationError(f"larger than {MAX_FILE_BYTES // 1000} KB")
        data = json_file.parse(raw, FILE)  # the runs folder's one parser: a 100,000-deep file is one line too
        if not isinstance(data, dict):
            raise AnnotationError("not a JSON object")
        return Annotations(tuple(check_tags(data.get("tags") or [])), check_note(data.get("note")))
    except json_file.JsonFileError as exc:  # names the file itself
        return Annotations(problems=[str(exc)])
    except (ValueError, AnnotationError) as exc:
        return Annotations(problems=[f"{FILE} is ignored: {str(exc).splitlines()[0][:160]}"])


@contextlib.contextmanager
def _locked(run_dir: Path):
    """`<run>/.annotations.lock` held (flock) for one save; AnnotationError when another save holds it
    longer than LOCK_WAIT_S. Opened without following a symlink: a run folder may come from elsewhere."""
    try:
        fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        raise AnnotationError(f"{FILE}: cannot lock {run_dir / LOCK} ({exc.strerror or exc}); nothing was saved") from None
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AnnotationError(f"{FILE}: another save of this run's tags and note did not finish within "
                                          f"{LOCK_WAIT_S:.0f} s; nothing was saved, try again") from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # drops the lock


def write(run_dir: str | Path, tags: Any, note: Any) -> Annotations:
    """Check, then replace the run's annotations.json whole (atomically, under the lock) and read it
    back; returns what is on disk now. Raises AnnotationError (one line) when the values are refused
    (before anything is written), the run folder is gone, or the file read back is not what was saved."""
    checked = Annotations(tuple(check_tags(tags)), check_note(note))
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise AnnotationError(f"no run directory {run_dir}")
    try:
        with _locked(run_dir):
            write_json_atomic(run_dir / FILE, {"tags": list(checked.tags), "note": checked.note,
                                               "updated_at": time.time()})
            stored = read(run_dir)
    except OSError as exc:  # a full disk, a folder removed meanwhile: nothing half-written stays (tmp + rename)
        raise AnnotationError(f"{FILE} could not be written ({exc.strerror or exc}); nothing was saved") from None
    if stored.problems or (stored.tags, stored.note) != (checked.tags, checked.note):
        raise AnnotationError(f"{FILE} read back differs from what was saved ({'; '.join(stored.problems) or 'changed'})")
    return stored
