"""What an import accepts from its source, checked before anything is written (docs/trl-and-verl.md,
"What an import refuses"). A source is input like any other: a planted file must get one line naming
the file (and the line), never a traceback, a hang, or a value the pages cannot draw.

- Step numbers: ASCII decimal digits, at most MAX_STEP (the 8 digits of a part file's name,
  rundir/layout.py `part_name`: a wider step would be written and never read back).
- Numbers: finite and at most MAX_ABS in size (a score of 1e400 or Infinity makes the group's
  std infinite and every advantage NaN).
- Text: a prompt or completion of at most MAX_TEXT_CHARS characters; a verl line of at most
  MAX_LINE_BYTES bytes; JSON nested at most MAX_DEPTH levels.
- Files: regular files only (a FIFO would block the import for good), opened without blocking.
- Pickles (TRL's training_args.bin): measured before they are loaded, pickle_limits.py.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, BinaryIO, Callable

from grpo_lab.rundir import reader
from grpo_lab.rundir.json_file import depth  # noqa: F401 - nesting without recursion: the runs folder's reader's
from grpo_lab.rundir.importers.build import SourceError

MAX_STEP = 99_999_999  # 8 digits: layout.PART_RE
MAX_ABS = 1e12  # a reward or extra value larger than this is taken for a broken file, not a score
MAX_TEXT_CHARS = 1_000_000  # per prompt and per completion (1 MB of text: the Groups page cuts it anyway)
MAX_LINE_BYTES = 8 << 20  # one verl line: a prompt, a completion and the extras
MAX_DEPTH = 64  # JSON nesting in one verl line
MAX_STATE_BYTES = 512 << 20  # trainer_state.json
MAX_EXTRAS, MAX_NAME_CHARS = 64, 100  # extra keys of one verl line: each becomes an extra/<key> column
ASCII_STEP = re.compile(r"[0-9]+", re.ASCII)


def step_number(text: str, path: Path) -> int:
    """The step a file name gives: ASCII decimals up to MAX_STEP, else one line naming the file.

    >>> step_number("00012", Path("12.jsonl"))
    12
    """
    if not ASCII_STEP.fullmatch(text):
        raise SourceError(f"{path}: the step in the file name must be ASCII digits 0-9; got {text!r}")
    if len(text.lstrip("0")) > len(str(MAX_STEP)) or int(text) > MAX_STEP:
        raise SourceError(f"{path}: step {text[:20]}{'...' if len(text) > 20 else ''} is larger than {MAX_STEP} "
                          "(steps have 8 digits in a run directory)")
    return int(text)


def unique_steps(found: list[tuple[int, Path]]) -> list[tuple[int, Path]]:
    """Sorted (step, file); two files of one step (`1.jsonl` and `01.jsonl`) are refused."""
    seen: dict[int, Path] = {}
    for step, path in found:
        if step in seen:
            raise SourceError(f"{path}: step {step} is also {seen[step].name}; keep one file per step")
        seen[step] = path
    return sorted(found)


def open_regular(path: Path) -> BinaryIO:
    """The file opened for reading, when it is a regular file (a FIFO or device is refused, not waited
    on): the run reader's open_regular, where it may lie anywhere (a source folder may link elsewhere)."""
    try:
        return reader.open_regular(path, within=Path(path).resolve().parent)
    except reader.UnsafeFileError:
        raise SourceError(f"{path}: expected a regular file (not a FIFO, device or folder)") from None
    except OSError as exc:
        raise SourceError(f"{path}: cannot be opened ({exc.strerror})") from None


def jsonl_rows(path: Path, parse: Callable[[bytes, str], Any], expected: str) -> list[Any]:
    """parse(line, "file:line") of each non-blank line of a JSON-lines dump, read as a regular file and
    bounded by MAX_LINE_BYTES a line; SourceError naming file:line for an overlong line, or the file for
    an empty one (`expected` says what a line should be)."""
    rows = []
    with open_regular(path) as fh:
        number = 0
        while line := fh.readline(MAX_LINE_BYTES + 1):
            number += 1
            if len(line) > MAX_LINE_BYTES:
                raise SourceError(f"{path}:{number}: the line is longer than {MAX_LINE_BYTES >> 20} MiB")
            if line.strip():
                rows.append(parse(line, f"{path}:{number}"))
    if not rows:
        raise SourceError(f"{path}: expected {expected}; the file is empty")
    return rows


def require_regular(path: Path) -> None:
    """Refuse a path that is not a regular file, before a library (pyarrow) opens it and blocks."""
    open_regular(path).close()


def number(value: Any, where: str, what: str) -> float:
    """A finite number of at most MAX_ABS, as float; anything else is one line naming `where` and `what`.

    >>> number(2, "1.jsonl:3", "score")
    2.0
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SourceError(f"{where}: {what} must be a number; got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise SourceError(f"{where}: {what} must be a finite number; got {value}")
    if abs(value) > MAX_ABS:
        shown = f"{value:.3g}" if isinstance(value, float) else f"an integer of {len(str(abs(value)))} digits"
        raise SourceError(f"{where}: {what} must be at most {MAX_ABS:g} in size; got {shown}")
    return float(value)


def text(value: str, where: str, what: str) -> str:
    if len(value) > MAX_TEXT_CHARS:
        raise SourceError(f"{where}: {what} has {len(value):,} characters; at most {MAX_TEXT_CHARS:,} are imported")
    return value


def refuse_constant(name: str) -> float:
    """json.loads(parse_constant=...): NaN, Infinity and -Infinity are not JSON numbers."""
    raise ValueError(f"{name} is not a finite number")


def extra(value: Any, where: str, key: str) -> Any:
    """One extra value (TRL's `log_extra`, a verl line's other keys) within the limits both importers
    share: a number finite and at most MAX_ABS (NaN passes: pandas' "no value"), text of at most
    MAX_TEXT_CHARS, an object at most MAX_DEPTH deep and MAX_TEXT_CHARS as JSON. Returns the value.

    >>> extra(0.5, "1.jsonl:1", "acc"), extra("4", "1.jsonl:1", "pred")
    (0.5, '4')
    """
    if isinstance(value, float) and math.isnan(value):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return number(value, where, key)
    if isinstance(value, str):
        return text(value, where, key)
    if isinstance(value, (list, dict)):
        if depth(value) > MAX_DEPTH:
            raise SourceError(f"{where}: {key} is nested deeper than {MAX_DEPTH} levels")
        text(json.dumps(value, default=str), where, key)
    return value
