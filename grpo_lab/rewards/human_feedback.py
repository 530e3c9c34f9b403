"""Human feedback: scores a person gave to (prompt, completion) pairs, read from CSV or Parquet.

The file has a prompt column, a completion column and a numeric score column. Pairs match on
the exact text with surrounding whitespace stripped. The rules:
- a pair rated several times (several raters) scores the mean of its ratings;
- a blank score means "not rated yet";
- a pair that is not rated scores `unrated` (default None: no score, so it is left out of its
  group's mean and std and gets advantage 0; set e.g. 0.0 to treat it as bad instead).
The file is re-read when it changes, so a person can keep rating while a run trains.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "ratings.csv"
>>> _ = path.write_text("prompt,completion,score\\n2+2=,4,1\\n2+2=,5,0\\n2+2=,4,0.5\\n")
>>> human_feedback_reward(str(path))(["2+2="] * 3, ["4", "5", "22"])
[0.75, 0.0, None]
"""

from __future__ import annotations

import os

from grpo_lab.rewards._text import as_text

FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def human_feedback_reward(
    path: str,
    prompt_column: str = "prompt",
    completion_column: str = "completion",
    score_column: str = "score",
    unrated: float | None = None,
):
    """path: a .csv or .parquet file; *_column: its column names; unrated: the score of a pair
    nobody rated (None: no score)."""
    columns = (prompt_column, completion_column, score_column)
    ratings = load_ratings(path, *columns)  # read once now: a bad file fails at launch
    state = {"mtime": os.stat(path).st_mtime_ns, "ratings": ratings}

    def human_feedback(prompts, completions, **kw) -> list[float | None]:
        mtime = os.stat(path).st_mtime_ns
        if mtime != state["mtime"]:
            state["ratings"] = load_ratings(path, *columns)
            state["mtime"] = mtime
        table = state["ratings"]
        return [
            table.get((as_text(p).strip(), as_text(c).strip()), unrated)
            for p, c in zip(prompts, completions)
        ]

    return human_feedback


def load_ratings(path: str, prompt_column: str, completion_column: str, score_column: str) -> dict:
    """{(prompt, completion): mean score} from the file; a one-line ValueError when it is unusable."""
    import pandas as pd

    kind = FORMATS.get(os.path.splitext(path)[1].lower())
    if kind is None:
        raise ValueError(f"human_feedback: {path!r} must end in one of {', '.join(FORMATS)}")
    if not os.path.isfile(path):
        raise ValueError(f"human_feedback: no such file {path!r}")
    if kind == "csv":
        # Everything as text first: a prompt "NA" must stay "NA", not become a missing value.
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    else:
        frame = pd.read_parquet(path)
    missing = [c for c in (prompt_column, completion_column, score_column) if c not in frame.columns]
    if missing:
        raise ValueError(
            f"human_feedback: {path!r} lacks column(s) {', '.join(missing)};"
            f" it has {', '.join(map(str, frame.columns))}"
        )
    raw = frame[score_column]
    blank = raw.isna() | raw.astype(str).str.strip().isin(["", "nan", "NaN"])
    scores = pd.to_numeric(raw.where(~blank), errors="coerce")
    bad = frame.index[scores.isna() & ~blank].tolist()
    if bad:
        rows = ", ".join(str(i + 2 if kind == "csv" else i) for i in bad[:5])
        raise ValueError(
            f"human_feedback: {path!r} has scores that are not numbers"
            f" ({'line' if kind == 'csv' else 'row'} {rows}); leave a score blank for 'not rated'"
        )
    sums: dict[tuple[str, str], list[float]] = {}
    for prompt, completion, score in zip(frame[prompt_column], frame[completion_column], scores):
        if score == score:  # not NaN: rated
            entry = sums.setdefault((str(prompt).strip(), str(completion).strip()), [0.0, 0])
            entry[0] += float(score)
            entry[1] += 1
    return {key: total / count for key, (total, count) in sums.items()}
