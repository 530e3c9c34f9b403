"""Ratings a person gives a run's completions: `<run>/labels/`, documented in docs/run-directory.md.

Append-only, one small JSON file per rating (`labels/ratings/<ns>-<pid>-<random>.json`, written
under a `.tmp-` name and renamed), so two browsers rating one run at once never overwrite each
other: there is no shared file to lose an update in, and no lock a dead browser session could hold.
The latest record of a (labeler, step, group, sample) counts; `undo` appends a record that cancels it.

Each rating names its completion by `(step, group, sample_idx)` and carries a hash of the completion
text at rating time (`completion_sha`), looked up in tables/samples, or, while the trainer waits for
ratings of a step it has not logged yet, in `labels/waiting.json` (rewards/human.py writes it). A
reader can then tell a rating of this exact text from one of an earlier attempt at the step.

Everything read back is input (a runs folder may come from elsewhere): each record is checked against
the run's scale and group size on every read (`check_record`), and one that fails is skipped with a
line naming its file and field (`read_checked`), never raised. Reading 20,000 small files takes
seconds, so a reader that finds COMPACT_AT of them folds them into one Parquet part (`compact`):
writers still write one file per rating and take no lock.

>>> import tempfile, pathlib
>>> run = pathlib.Path(tempfile.mkdtemp())
>>> set_waiting(run, step=1, groups=[{"group": 0, "prompt_id": "1+1", "prompt": "1+1=", "completions": ["2", "3"]}])
>>> add(run, step=1, group=0, sample=0, score=1, labeler="ann")
>>> add(run, step=1, group=0, sample=1, score=0, labeler="ann")
>>> read(run)[["sample_idx", "score", "labeler"]].to_dict("records")
[{'sample_idx': 0, 'score': 1.0, 'labeler': 'ann'}, {'sample_idx': 1, 'score': 0.0, 'labeler': 'ann'}]
>>> undo(run, step=1, group=0, sample=1, labeler="ann")
>>> len(read(run)), len(read(run, history=True))
(1, 3)
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import numbers
import os
import secrets
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from grpo_lab.rundir import json_file
from grpo_lab.rundir.layout import RunLock, read_json, write_json_atomic

SCALES = {"thumbs": (0, 1), "1-5": (1, 5)}  # name -> (lowest, highest) score; scores are whole numbers
DEFAULT_SCALE = "thumbs"
COLUMNS = ["step", "group", "sample_idx", "prompt_id", "completion_sha", "score", "rank", "labeler", "time", "undone"]
KEY = ["labeler", "step", "group", "sample_idx"]
MAX_LABELER = 64
MAX_INDEX = 2**31 - 1  # the bound of step, group and sample_idx on read (an int64 sum of them never overflows)
MAX_TEXT = 1000  # prompt_id, completion_sha
MAX_RECORD_BYTES = 4096  # a record is ~300 bytes: checked before parsing (no deep nesting, no megabytes)
MAX_PART_BYTES = 256 * 2**20
COMPACT_AT = 64  # loose rating files that make a reader fold them into a Parquet part
PART_GLOB = "ratings-*.parquet"
NAN_SCORE = "_nan_score"  # read-time column: the part's score is NaN (not null)
PART_SCHEMA = pa.schema([("file", pa.string()), ("step", pa.int64()), ("group", pa.int64()),
                         ("sample_idx", pa.int64()), ("prompt_id", pa.string()), ("completion_sha", pa.string()),
                         ("score", pa.float64()), ("rank", pa.int64()), ("labeler", pa.string()),
                         ("time", pa.float64()), ("undone", pa.bool_())])


class LabelError(ValueError):
    """A rating that cannot be stored; the message is one line naming the field."""


def folder(run_dir: str | Path) -> Path:
    return Path(run_dir) / "labels"


def completion_sha(text: str) -> str:
    """The first 16 hex digits of the completion text's SHA-256: names a text without storing it twice.

    >>> completion_sha("4")
    '4b227777d4dd1fc6'
    """
    return hashlib.sha256(str(text).encode()).hexdigest()[:16]


# --- settings: the run's rating scale -------------------------------------------------------------


def settings(run_dir: str | Path) -> dict[str, Any]:
    """`labels/settings.json` with defaults filled in: {"scale": "thumbs" | "1-5"}. A damaged or
    unknown value reads as the default: settings are read from disk, so they are input."""
    data = read_json(folder(run_dir) / "settings.json") or {}
    scale = data.get("scale")
    return {"scale": scale if scale in SCALES else DEFAULT_SCALE}


def set_scale(run_dir: str | Path, scale: str) -> None:
    if scale not in SCALES:
        raise LabelError(f"scale: must be one of {', '.join(SCALES)}, got {scale!r}")
    write_json_atomic(folder(run_dir) / "settings.json", {**settings(run_dir), "scale": scale})


# --- the trainer waiting for ratings (rewards/human.py) ---------------------------------------------


def set_waiting(run_dir: str | Path, *, step: int, groups: list[dict], min_groups: int = 1,
                deadline: float | None = None) -> None:
    """Say that the trainer waits for ratings of `step`, whose groups are not in tables/samples yet:
    each group a dict with group, prompt_id, prompt and completions (texts, in sample order)."""
    write_json_atomic(folder(run_dir) / "waiting.json", {
        "step": int(step), "pid": os.getpid(), "since": time.time(), "deadline": deadline,
        "min_groups": int(min_groups), "groups": groups})


def clear_waiting(run_dir: str | Path) -> None:
    (folder(run_dir) / "waiting.json").unlink(missing_ok=True)


def waiting(run_dir: str | Path) -> dict[str, Any] | None:
    """The waiting record, or None. Its writer may have died: callers check the run's status too."""
    data = read_json(folder(run_dir) / "waiting.json")
    if not data or not isinstance(data.get("step"), int) or not isinstance(data.get("groups"), list):
        return None
    return data


def close_step(run_dir: str | Path, step: int, at: float) -> None:
    """The `human` reward scored `step` with the ratings given up to `at` (Unix seconds): a later
    rating of it is late (kept, read by the reward model and exports, never part of that step's
    reward). `labels/closed.json` maps step to that time; the trainer is its one writer."""
    closed = {str(s): t for s, t in closed_steps(run_dir).items()}
    write_json_atomic(folder(run_dir) / "closed.json", {**closed, str(int(step)): float(at)})


def closed_steps(run_dir: str | Path) -> dict[int, float]:
    """{step: the time its ratings were read for its reward}; entries that are not a step and a time
    are left out (the file is read from disk: input)."""
    data = read_json(folder(run_dir) / "closed.json") or {}
    return {int(s): float(t) for s, t in data.items() if isinstance(s, str) and s.isdigit()
            and isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t)}


def late(ratings: pd.DataFrame, run_dir: str | Path) -> pd.Series:
    """True for each rating (read's rows) given after the trainer scored its step (close_step)."""
    closed = ratings["step"].map(closed_steps(run_dir))
    return (closed.notna() & (ratings["time"] > closed)).astype(bool)


def _waiting_text(run_dir: Path, step: int, group: int, sample: int) -> tuple[str, str] | None:
    data = waiting(run_dir)
    if not data or data["step"] != step:
        return None
    for g in data["groups"]:
        if isinstance(g, dict) and g.get("group") == group:
            texts = g.get("completions") or []
            if 0 <= sample < len(texts):
                return str(g.get("prompt_id", "")), str(texts[sample])
    return None


def _sample_text(run_dir: Path, step: int, group: int, sample: int) -> tuple[str, str] | None:
    """(prompt_id, completion) of one logged completion, or None when the run has no such row."""
    from grpo_lab.rundir.query import query  # noqa: PLC0415 - duckdb only when a rating is written

    df, _ = query(run_dir, "samples", 'SELECT prompt_id, completion FROM {src} WHERE step = $s AND "group" = $g '
                  "AND sample_idx = $i LIMIT 1", {"s": step, "g": group, "i": sample})
    if df.empty:
        return None
    return str(df["prompt_id"].iloc[0]), str(df["completion"].iloc[0])


# --- writing --------------------------------------------------------------------------------------


def _whole(name: str, value: Any, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise LabelError(f"{name}: must be a whole number >= {low}, got {value!r}")
    return int(value)


def check_labeler(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value.strip()) > MAX_LABELER or \
            any(ch in value for ch in "\r\n\t"):
        raise LabelError(f"labeler: must be a name of 1-{MAX_LABELER} characters on one line, got {value!r}")
    return value.strip()


def _score(value: Any, scale: str) -> float | None:
    if value is None:
        return None
    low, high = SCALES[scale]
    number = float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else math.nan
    if isinstance(value, bool):  # thumbs up / down from a checkbox: True is 1, False is 0
        number = float(value)
    if not (low <= number <= high) or number != int(number):
        raise LabelError(f"score: the run's scale is {scale!r}: a whole number {low}..{high}, got {value!r}")
    return number


def _append(run_dir: Path, record: dict[str, Any]) -> None:
    name = f"{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(4)}.json"
    write_json_atomic(folder(run_dir) / "ratings" / name, record)


def _locate(run_dir: Path, step: int, group: int, sample: int) -> tuple[str, str]:
    found = _sample_text(run_dir, step, group, sample) or _waiting_text(run_dir, step, group, sample)
    if found is None:
        raise LabelError(f"sample: run {run_dir.name} has no completion at step {step}, group {group}, "
                         f"sample {sample}")
    return found[0], completion_sha(found[1])


def add(run_dir: str | Path, *, step: int, group: int, sample: int, score: float | None = None,
        labeler: str, rank: int | None = None) -> None:
    """Store one rating: `score` on the run's scale (settings()), and/or `rank` within the group
    (1 = best). The completion must exist (tables/samples, or the step the trainer waits on)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise LabelError(f"run_dir: {str(run_dir)!r} is not a run directory")
    step, group, sample = _whole("step", step, 1), _whole("group", group), _whole("sample", sample)
    who = check_labeler(labeler)
    value = _score(score, settings(run_dir)["scale"])
    if rank is not None:
        rank = _whole("rank", rank, 1)
    if value is None and rank is None:
        raise LabelError("score: give a score or a rank (both None)")
    prompt_id, sha = _locate(run_dir, step, group, sample)
    _append(run_dir, {"step": step, "group": group, "sample_idx": sample, "prompt_id": prompt_id,
                      "completion_sha": sha, "score": value, "rank": rank, "labeler": who, "time": time.time(),
                      "undone": False})


def undo(run_dir: str | Path, *, step: int, group: int, sample: int, labeler: str) -> None:
    """Cancel `labeler`'s rating of this completion (appends a record; nothing is deleted)."""
    run_dir = Path(run_dir)
    step, group, sample = _whole("step", step, 1), _whole("group", group), _whole("sample", sample)
    _append(run_dir, {"step": step, "group": group, "sample_idx": sample, "prompt_id": None,
                      "completion_sha": None, "score": None, "rank": None, "labeler": check_labeler(labeler),
                      "time": time.time(), "undone": True})


# --- reading --------------------------------------------------------------------------------------


def _problem(field: str, allowed: str, value: Any) -> str:
    shown = repr(value)
    return f"{field}: {allowed}, got {shown if len(shown) <= 40 else shown[:39] + '…'}"


def _index(record: dict, field: str, high: int) -> str | None:
    value = record.get(field)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        return _problem(field, f"a whole number 0..{high}", value)
    return None


def check_record(record: Any, scale: str | None = None, group_size: int | None = None) -> str | None:
    """What is wrong with one rating record as read from disk (one line naming the field), or None.

    Every field is typed as add/undo write it and bounded; with `scale` the score must be on it, with
    `group_size` the sample and the rank must fit in a group. A record is input like any other: the
    `human` reward trains on it, so a score of 1e308 or NaN must never get through.

    >>> check_record({"step": 1, "group": 0, "sample_idx": 0, "labeler": "ann", "time": 1.0, "undone": "no"})
    "undone: true or false, got 'no'"
    >>> check_record({"step": 1, "group": 0, "sample_idx": 0, "labeler": "ann", "time": 1.0, "score": 1e308,
    ...               "undone": False}, scale="thumbs")
    "score: a whole number 0..1 (the run's scale is 'thumbs'), got 1e+308"
    """
    if not isinstance(record, dict):
        return f"not a rating record (a JSON object), got {type(record).__name__}"
    samples = group_size if group_size else MAX_INDEX + 1
    problem = (_index(record, "step", MAX_INDEX) or _index(record, "group", MAX_INDEX)
               or _index(record, "sample_idx", samples - 1))
    if problem:
        return problem
    try:
        check_labeler(record.get("labeler"))
    except LabelError as exc:
        return str(exc)
    moment = record.get("time")
    if isinstance(moment, bool) or not isinstance(moment, (int, float)) or not 0 <= moment < math.inf:
        return _problem("time", "Unix seconds (a number >= 0)", moment)
    if not isinstance(record.get("undone", False), bool):
        return _problem("undone", "true or false", record.get("undone"))
    for field in ("prompt_id", "completion_sha"):
        value = record.get(field)
        if value is not None and (not isinstance(value, str) or len(value) > MAX_TEXT):
            return _problem(field, f"text of at most {MAX_TEXT} characters, or null", value)
    score, rank = record.get("score"), record.get("rank")
    if score is not None:
        number = score if isinstance(score, (int, float)) and not isinstance(score, bool) else math.nan
        low, high = SCALES.get(scale, (-MAX_INDEX, MAX_INDEX))
        if not (low <= number <= high and number == int(number)):
            on = f" (the run's scale is {scale!r})" if scale else ""
            return _problem("score", f"a whole number {low}..{high}{on}", score)
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= samples):
        return _problem("rank", f"a whole number 1..{samples} (a place in the group)", rank)
    if score is None and rank is None and not record.get("undone", False):
        return "score: a rating gives a score or a rank (both null)"
    return None


def _group_size(run_dir: Path) -> int | None:
    """The run's group size from config.json (None when it does not say: no bound but MAX_INDEX)."""
    size = (read_json(Path(run_dir) / "config.json") or {}).get("group_size")
    return size if isinstance(size, int) and not isinstance(size, bool) and 1 <= size <= MAX_INDEX else None


class _Moved(Exception):
    """A file listed a moment ago is gone: a compaction folded it; read again."""


def _load_record(path: str) -> tuple[Any, str | None]:
    """(the parsed file, None) or (None, the line saying why it is skipped): the runs folder's one JSON
    reader, its size checked before parsing, so deep nesting or megabytes cost nothing. _Moved when
    it is gone."""
    try:
        return json_file.load(path, max_bytes=MAX_RECORD_BYTES, max_depth=2), None
    except FileNotFoundError:
        raise _Moved from None
    except json_file.JsonFileError as exc:
        return None, f"ratings/{exc}"


def _read_part(path: Path) -> pd.DataFrame:
    """A compacted part's rows (columns `file` and COLUMNS, typed as PART_SCHEMA); ValueError saying
    why it cannot be read."""
    from grpo_lab.rundir.reader import UnsafeFileError, open_regular  # noqa: PLC0415 - reader imports much

    try:
        with open_regular(path) as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_PART_BYTES:
                raise ValueError(f"{size} bytes; a part is at most {MAX_PART_BYTES}")
            table = pq.read_table(fh)
    except FileNotFoundError:
        raise _Moved from None
    except (UnsafeFileError, OSError, pa.ArrowException) as exc:
        raise ValueError((str(exc).splitlines() or [type(exc).__name__])[0][:200]) from None
    if missing := [n for n in PART_SCHEMA.names if n not in table.column_names]:
        raise ValueError(f"no column {missing[0]}")
    try:
        table = table.select(PART_SCHEMA.names).cast(PART_SCHEMA)
    except pa.ArrowException as exc:
        raise ValueError((str(exc).splitlines() or [type(exc).__name__])[0][:200]) from None
    df = table.to_pandas()
    # pandas reads a null score and a NaN one alike; a NaN score is a bad record, never "no score"
    df[NAN_SCORE] = pc.fill_null(pc.is_nan(table.column("score")), False).to_numpy(zero_copy_only=False)
    return df


def _scan_once(run_dir: Path) -> tuple[pd.DataFrame, dict[str, Any], list[str], list[str], list[Path]]:
    """(the parts' rows, {loose file name: record}, problems, loose file names, parts read). Loose
    files are listed before the parts: a file folded after its listing is in a part listed after it."""
    ratings = str(folder(run_dir) / "ratings")
    try:
        loose = sorted(n for n in os.listdir(ratings) if n.endswith(".json") and not n.startswith(".tmp-"))
    except OSError:
        loose = []
    frames, problems, read_parts = [], [], []
    for part in sorted(folder(run_dir).glob(PART_GLOB)):
        try:
            frames.append(_read_part(part))
        except ValueError as exc:
            problems.append(f"labels/{part.name}: not a ratings part ({exc}); its ratings are not read")
            continue
        read_parts.append(part)
    parts = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*PART_SCHEMA.names, NAN_SCORE])
    parts = parts.drop_duplicates("file")  # a file folded twice (a killed compaction) counts once
    folded = set(parts["file"].to_numpy(dtype=object)) if loose else set()  # (iterating the column is slow)
    records: dict[str, Any] = {}
    for name in loose:
        if name in folded:
            continue  # its part is written, the file not deleted yet
        record, problem = _load_record(os.path.join(ratings, name))
        if problem:
            problems.append(problem)
        else:
            records[name] = record
    return parts, records, problems, loose, read_parts


def _scan(run_dir: Path) -> tuple[pd.DataFrame, dict[str, Any], list[str], list[str], list[Path]]:
    for _ in range(5):  # each retry means a compaction finished meanwhile; the next read sees its part
        try:
            return _scan_once(run_dir)
        except _Moved:
            continue
    raise OSError(f"{folder(run_dir)}: ratings keep moving (compactions without end?)")


def _rows_ok(df: pd.DataFrame, scale: str | None, group_size: int | None) -> pd.Series:
    """check_record over a part's typed rows at once (True: passes); the per-record check names the
    field of the few that fail."""
    samples = group_size or MAX_INDEX + 1
    low, high = SCALES.get(scale, (-MAX_INDEX, MAX_INDEX))
    ok = df["step"].between(0, MAX_INDEX) & df["group"].between(0, MAX_INDEX) & df["sample_idx"].between(0, samples - 1)
    name = df["labeler"].fillna("").astype(str)
    size = name.str.strip().str.len()
    ok &= (size > 0) & (size <= MAX_LABELER) & ~name.str.contains("[\r\n\t]")
    ok &= (df["time"] >= 0) & (df["time"] < math.inf)
    ok &= df["undone"].notna()
    for field in ("prompt_id", "completion_sha"):
        ok &= df[field].isna() | (df[field].astype(str).str.len() <= MAX_TEXT)
    score, rank = df["score"], df["rank"]
    ok &= (score.isna() & ~df[NAN_SCORE].astype(bool)) | (score.between(low, high) & (score == score.round()))
    ok &= rank.isna() | rank.between(1, samples)
    ok &= score.notna() | rank.notna() | (df["undone"] == True)  # noqa: E712 - elementwise, nulls False
    return ok.fillna(False).astype(bool)


def _record(row: dict) -> dict:
    """A part's row as the JSON record it came from (pandas' NaN for null back to None)."""
    nan = row.pop(NAN_SCORE, False)
    record = {k: (None if v is pd.NA or isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
    for k in ("step", "group", "sample_idx", "rank"):  # an int column with nulls comes back as floats
        if isinstance(record.get(k), float) and record[k].is_integer():
            record[k] = int(record[k])
    return {**record, "score": math.nan} if nan else record


def _checked(parts: pd.DataFrame, records: dict[str, Any], problems: list[str],
             scale: str | None, group_size: int | None) -> pd.DataFrame:
    """Every row that passes check_record (file and COLUMNS), oldest first; a problem line for each other."""
    ok = _rows_ok(parts, scale, group_size) if len(parts) else pd.Series([], dtype=bool)
    for row in parts[~ok].to_dict("records"):
        file = row.pop("file")
        why = check_record(_record(row), scale, group_size) or "fails the checks"
        problems.append(f"ratings/{file}: {why}; skipped")
    rows = []
    for name, record in records.items():
        if problem := check_record(record, scale, group_size):
            problems.append(f"ratings/{name}: {problem}; skipped")
        else:
            rows.append({"file": name, **{k: record.get(k) for k in COLUMNS}, "undone": record.get("undone", False),
                         NAN_SCORE: False})
    loose = pd.DataFrame(rows, columns=[*PART_SCHEMA.names, NAN_SCORE])
    df = pd.concat([parts[ok], loose], ignore_index=True) if len(loose) else parts[ok]
    df = df.astype({"step": "int64", "group": "int64", "sample_idx": "int64", "score": "float64",
                    "rank": "Int64", "time": "float64", "undone": "bool"})
    for text in ("prompt_id", "completion_sha", "labeler"):  # as from JSON: Python str or None, from a part too
        df[text] = df[text].astype(object).where(df[text].notna(), None)
    df = df.sort_values("file", kind="stable")  # file names sort by time; then by the time they name inside
    return df.sort_values("time", kind="stable").reset_index(drop=True)


def compact(run_dir: str | Path) -> bool:
    """Fold the loose rating files into one Parquet part (with the parts already there), then delete
    what it folded. Under `labels/.lock` (flock, never waited for: a reader that finds it taken reads
    without folding); False when another process holds it. Each record keeps its file name (column
    `file`), so a compaction killed between writing the part and deleting files leaves duplicates that
    a reader counts once. Records that fail the scale-free checks stay loose files, never deleted;
    the run's scale is checked on every read (it can change after a rating)."""
    run_dir = Path(run_dir)
    lock = RunLock(folder(run_dir))
    if not lock.acquire():
        return False
    try:
        parts, records, _, loose, read_parts = _scan(run_dir)
        df = _checked(parts, records, [], None, None)
        target = folder(run_dir) / f"ratings-{time.time_ns():020d}-{os.getpid()}.parquet"
        tmp = target.with_name(f".tmp-{target.name}")
        table = pa.Table.from_pandas(df[PART_SCHEMA.names], schema=PART_SCHEMA, preserve_index=False)
        pq.write_table(table, tmp)
        os.replace(tmp, target)
        for old in read_parts:
            old.unlink(missing_ok=True)
        ratings, folded = str(folder(run_dir) / "ratings"), set(df["file"])
        for name in loose:
            if name in folded:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(ratings, name))
        return True
    finally:
        lock.release()


def read_checked(run_dir: str | Path, history: bool = False) -> tuple[pd.DataFrame, list[str]]:
    """`read`'s DataFrame and one problem line per skipped file (or part), naming it and the field:
    a bad file is counted and shown (the Groups page's ratings summary), never raised. With COMPACT_AT
    or more loose files the reader folds them first (`compact`)."""
    run_dir = Path(run_dir)
    scan = _scan(run_dir)
    if sum(check_record(r) is None for r in scan[1].values()) >= COMPACT_AT:  # bad files stay loose: not counted
        try:
            if compact(run_dir):
                scan = _scan(run_dir)
        except (OSError, pa.ArrowException):  # a read-only or full folder: read it as it is
            pass
    parts, records, problems, _, _ = scan
    df = _checked(parts, records, problems, settings(run_dir)["scale"], _group_size(run_dir))[COLUMNS]
    if history:
        return df, problems
    latest = df.drop_duplicates(KEY, keep="last")
    return latest[~latest["undone"]].sort_values(["step", "group", "sample_idx", "labeler"]).reset_index(drop=True), \
        problems


def read(run_dir: str | Path, history: bool = False) -> pd.DataFrame:
    """The ratings as a DataFrame (COLUMNS). Default: the rating that counts for each (labeler, step,
    group, sample_idx), its latest record, undone ones left out. history=True: every record, oldest first.
    Files that fail `check_record` are skipped (read_checked says which and why)."""
    return read_checked(run_dir, history)[0]
