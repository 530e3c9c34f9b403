"""Ratings a person gives a run's completions: `<run>/labels/`, documented in docs/run-directory.md.

Append-only, one small JSON file per rating (`labels/ratings/<ns>-<pid>-<random>.json`, written
under a `.tmp-` name and renamed), so two browsers rating one run at once never overwrite each
other: there is no shared file to lose an update in, and no lock a dead browser session could hold.
The latest record of a (labeler, step, group, sample) counts; `undo` appends a record that cancels it.

Each rating names its completion by `(step, group, sample_idx)` and carries a hash of the completion
text at rating time (`completion_sha`), looked up in tables/samples, or, while the trainer waits for
ratings of a step it has not logged yet, in `labels/waiting.json` (rewards/human.py writes it). A
reader can then tell a rating of this exact text from one of an earlier attempt at the step.

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

import hashlib
import math
import numbers
import os
import secrets
import time
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_lab.rundir.layout import read_json, write_json_atomic

SCALES = {"thumbs": (0, 1), "1-5": (1, 5)}  # name -> (lowest, highest) score; scores are whole numbers
DEFAULT_SCALE = "thumbs"
COLUMNS = ["step", "group", "sample_idx", "prompt_id", "completion_sha", "score", "rank", "labeler", "time", "undone"]
KEY = ["labeler", "step", "group", "sample_idx"]
MAX_LABELER = 64


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


def _valid(record: Any) -> bool:
    """A record as add/undo write it; anything else in the folder (damaged, hand-edited) is skipped."""
    if not isinstance(record, dict):
        return False
    ints = all(isinstance(record.get(k), int) and not isinstance(record.get(k), bool)
               for k in ("step", "group", "sample_idx"))
    return ints and isinstance(record.get("labeler"), str) and isinstance(record.get("time"), (int, float))


def read(run_dir: str | Path, history: bool = False) -> pd.DataFrame:
    """The ratings as a DataFrame (COLUMNS). Default: the rating that counts for each (labeler, step,
    group, sample_idx), its latest record, undone ones left out. history=True: every record, oldest first."""
    ratings = folder(run_dir) / "ratings"
    try:
        names = sorted(n for n in os.listdir(ratings) if n.endswith(".json") and not n.startswith(".tmp-"))
    except OSError:
        names = []
    records = [r for r in (read_json(ratings / n) for n in names) if _valid(r)]
    df = pd.DataFrame([{k: r.get(k) for k in COLUMNS} for r in records], columns=COLUMNS)
    df = df.astype({"step": "int64", "group": "int64", "sample_idx": "int64", "score": "float64",
                    "rank": "Int64", "time": "float64", "undone": "bool"})
    df = df.sort_values("time", kind="stable").reset_index(drop=True)  # file names sort by time already
    if history:
        return df
    latest = df.drop_duplicates(KEY, keep="last")
    return latest[~latest["undone"]].sort_values(["step", "group", "sample_idx", "labeler"]).reset_index(drop=True)

