"""The one reader for the small JSON files of a runs folder: status.json, config.json, annotations.json,
ratings and their settings, launch-queue entries, sweep manifests.

A runs folder may come from someone else, so each file is input: it is read only when it is a regular
file (a FIFO planted as status.json must not hang a page), at most `max_bytes` of it, and nested at most
MAX_DEPTH levels. Python's json parser recurses once per level, so a 100,000-deep `[[[...]]]` raises
RecursionError, which is not a ValueError and used to escape every reader up to the page; here it is
caught, and a file nested deeper than MAX_DEPTH (but within the parser's reach) is measured without
recursion after parsing. Every refusal is one line naming the file, and the caller makes it that run's
problem line: the other runs are still listed.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = (folder / "ok.json").write_text('{"step": 3}')
>>> _ = (folder / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
>>> read(folder / "ok.json")
({'step': 3}, None)
>>> read(folder / "deep.json")
(None, 'deep.json is nested deeper than 64 levels, so it is not read')
>>> read(folder / "missing.json")
(None, None)
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

MAX_BYTES = 4 << 20  # a config.json with long reward_params fits many times; status.json is < 1 KB
MAX_DEPTH = 64  # config.json nests 3 levels (reward_params.<reward>.<param>); JSON from elsewhere may use more


class JsonFileError(ValueError):
    """A file that is not read: the message is one line naming it and why."""


def depth(value: Any) -> int:
    """How deeply lists and objects nest in a parsed value (a scalar: 0), without recursion.

    >>> depth({"a": [1, {"b": 2}]}), depth(3)
    (3, 0)
    """
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, level + 1)
            stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def parse(raw: bytes | str, name: str, max_depth: int = MAX_DEPTH) -> Any:
    """`raw` as JSON, nested at most `max_depth` levels; JsonFileError (one line naming `name`) otherwise."""
    try:
        data = json.loads(raw)
    except RecursionError:
        raise JsonFileError(f"{name} is nested deeper than {max_depth} levels, so it is not read") from None
    except ValueError as exc:  # JSONDecodeError, and bytes that are not UTF-8
        raise JsonFileError(f"{name} is not valid JSON ({str(exc).splitlines()[0][:120]}), so it is not read") from None
    # depth never exceeds the brackets opened, so a file with few of them (every config.json) needs no walk
    opened = raw.count(b"[") + raw.count(b"{") if isinstance(raw, bytes) else raw.count("[") + raw.count("{")
    if opened > max_depth and depth(data) > max_depth:
        raise JsonFileError(f"{name} is nested deeper than {max_depth} levels, so it is not read")
    return data


def load(path: str | Path, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The parsed file. FileNotFoundError when it is missing; JsonFileError (one line) when it is not a
    regular file, larger than `max_bytes`, unreadable, not JSON, or nested deeper than `max_depth`."""
    name = os.path.basename(path)  # (a str path stays one: a runs folder's listing reads thousands)
    try:  # O_NONBLOCK, then a regular-file check: a FIFO is refused, never waited on
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise JsonFileError(f"{name} could not be read ({exc.strerror or exc})") from None
    # checked on the descriptor, before anything reads it: reading a folder's descriptor raises
    # IsADirectoryError, which is no ValueError (a folder named like a rating file took Groups down)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise JsonFileError(f"{name} is not a regular file (a folder, a FIFO or a device?), so it is not read")
    try:
        raw = _read_at_most(fd, max_bytes + 1, st.st_size)  # never more than the cap, however large the file
    except OSError as exc:
        raise JsonFileError(f"{name} could not be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(raw) > max_bytes:
        raise JsonFileError(f"{name} is larger than {_size(max_bytes)}, so it is not read")
    return parse(raw, name, max_depth)


def _read_at_most(fd: int, limit: int, size: int) -> bytes:
    """Up to `limit` bytes of the open regular file of `size` bytes (as fstat said). os.read, and one
    call for a small file: a read of a regular file returns less than asked only at its end, and a
    runs folder's listing reads thousands of small files."""
    chunks, left = [], limit
    while left > 0:
        asked = min(left, 1 << 20, size + 1 if not chunks else 1 << 20)  # +1: a file grown since fstat shows
        chunk = os.read(fd, asked)
        if chunk:
            chunks.append(chunk)
            left -= len(chunk)
        if len(chunk) < asked:
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read(path: str | Path, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> tuple[dict | None, str | None]:
    """(the file's mapping, None); (None, None) when it is missing; (None, one line) when it is refused
    or holds something other than a JSON object."""
    try:
        data = load(path, max_bytes, max_depth)
    except FileNotFoundError:
        return None, None
    except JsonFileError as exc:
        return None, str(exc)
    if not isinstance(data, dict):
        return None, f"{os.path.basename(path)} holds {type(data).__name__}, not a JSON object, so it is not read"
    return data, None


def read_json(path: str | Path) -> dict[str, Any] | None:
    """The file's mapping, or None when it is missing or refused (read() says why)."""
    return read(path)[0]


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n // 1000} KB"
