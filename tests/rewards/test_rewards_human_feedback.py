"""Human feedback: ratings from a CSV or Parquet file a person filled in."""

import os
import time

import pandas as pd
import pytest

from grpo_lab import rewards

ROWS = [
    {"prompt": "2+2=", "completion": "4", "score": 1.0},
    {"prompt": "2+2=", "completion": "4", "score": 0.0},  # a second rater disagrees
    {"prompt": "2+2=", "completion": "5", "score": -1.0},
    {"prompt": "NA", "completion": "None", "score": 0.5},  # text that pandas likes to turn into NaN
    {"prompt": "2+2=", "completion": "four", "score": None},  # blank: not rated yet
]


def write(path, rows=ROWS):
    frame = pd.DataFrame(rows)
    if str(path).endswith(".csv"):
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)
    return str(path)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_scores_from_the_file_with_the_unrated_rule(tmp_path, suffix):
    fn = rewards.build("human_feedback", path=write(tmp_path / f"ratings{suffix}"))
    prompts = ["2+2=", "2+2=", "NA", "2+2=", "2+2=", " 2+2= "]
    completions = ["4", "5", "None", "four", "22", "4\n"]
    assert fn(prompts, completions, answer=["4"] * 6) == [0.5, -1.0, 0.5, None, None, 0.5]


def test_unrated_pairs_can_score_a_default(tmp_path):
    fn = rewards.build("human_feedback", path=write(tmp_path / "r.csv"), unrated=0.0)
    assert fn(["2+2=", "2+2="], ["four", "22"]) == [0.0, 0.0]


def test_custom_column_names(tmp_path):
    rows = [{"q": "hi", "a": "hello", "stars": 4}]
    fn = rewards.build("human_feedback", path=write(tmp_path / "r.csv", rows),
                       prompt_column="q", completion_column="a", score_column="stars")
    assert fn(["hi"], ["hello"]) == [4.0]


def test_the_file_is_reread_when_a_person_adds_ratings(tmp_path):
    path = write(tmp_path / "r.csv")
    fn = rewards.build("human_feedback", path=path)
    assert fn(["2+2="], ["four"]) == [None]
    write(path, ROWS[:4] + [{"prompt": "2+2=", "completion": "four", "score": 0.8}])
    stamp = time.time() + 5
    os.utime(path, (stamp, stamp))  # a distinct mtime even on coarse filesystems
    assert fn(["2+2="], ["four"]) == [0.8]


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda d: str(d / "missing.csv"), "no such file"),
        (lambda d: str(d / "ratings.txt"), "must end in one of"),
        (
            lambda d: write(d / "r.csv", [{"prompt": "p", "answer": "c", "score": 1}]),
            "lacks column(s) completion",
        ),
        (
            lambda d: write(d / "r.csv", [{"prompt": "p", "completion": "c", "score": "good"}]),
            "not numbers (line 2)",
        ),
    ],
)
def test_bad_files_fail_at_build_with_a_clear_message(tmp_path, setup, message):
    with pytest.raises(ValueError) as info:
        rewards.build("human_feedback", path=setup(tmp_path))
    assert message in str(info.value) and "\n" not in str(info.value)
