"""labels: the ratings table of a run directory (grpo_lab/rundir/labels.py)."""

from __future__ import annotations

import doctest
import subprocess
import sys

import pytest

from grpo_lab.rundir import labels
from labels_helpers import fake_run


@pytest.fixture
def run(tmp_path):
    return fake_run(tmp_path)


def test_doctests():
    result = doctest.testmod(labels)
    assert result.failed == 0 and result.attempted > 0


def test_add_looks_up_the_completion_and_reads_back(run):
    labels.add(run, step=2, group=1, sample=3, score=1, labeler="ann")
    df = labels.read(run)
    assert df.columns.tolist() == labels.COLUMNS
    row = df.iloc[0]
    assert (row.step, row.group, row.sample_idx, row.prompt_id) == (2, 1, 3, "1+2")
    assert row.completion_sha == labels.completion_sha("xxxx") and row.score == 1.0 and row.labeler == "ann"
    assert not row.undone and row["rank"] is labels.pd.NA


def test_latest_rating_of_a_person_counts_and_undo(run):
    labels.add(run, step=1, group=0, sample=0, score=1, labeler="ann")
    labels.add(run, step=1, group=0, sample=0, score=0, labeler="ann")  # changed her mind
    labels.add(run, step=1, group=0, sample=0, score=1, labeler="bob")  # another person: kept apart
    now = labels.read(run)
    assert sorted(zip(now["labeler"], now["score"])) == [("ann", 0.0), ("bob", 1.0)]
    labels.undo(run, step=1, group=0, sample=0, labeler="bob")
    assert labels.read(run)["labeler"].tolist() == ["ann"]
    history = labels.read(run, history=True)
    assert len(history) == 4 and history["undone"].tolist() == [False, False, False, True]
    labels.add(run, step=1, group=0, sample=0, score=1, labeler="bob")  # rated again after the undo
    assert len(labels.read(run)) == 2


def test_ranks_and_the_1_to_5_scale(run):
    labels.add(run, step=1, group=1, sample=2, rank=1, labeler="ann")
    assert labels.read(run)["rank"].tolist() == [1]
    with pytest.raises(labels.LabelError, match=r"^score: the run's scale is 'thumbs': a whole number 0..1, got 4$"):
        labels.add(run, step=1, group=1, sample=2, score=4, labeler="ann")
    labels.set_scale(run, "1-5")
    labels.add(run, step=1, group=1, sample=2, score=4, labeler="ann")
    assert labels.settings(run) == {"scale": "1-5"} and labels.read(run)["score"].tolist() == [4.0]


@pytest.mark.parametrize("kwargs, message", [
    ({"step": 0}, "step: must be a whole number >= 1, got 0"),
    ({"group": -1}, "group: must be a whole number >= 0, got -1"),
    ({"sample": 1.5}, "sample: must be a whole number >= 0, got 1.5"),
    ({"score": 0.5}, "score: the run's scale is 'thumbs': a whole number 0..1, got 0.5"),
    ({"score": float("nan")}, "score: the run's scale is 'thumbs'"),
    ({"score": None}, "score: give a score or a rank (both None)"),
    ({"rank": 0}, "rank: must be a whole number >= 1, got 0"),
    ({"labeler": " "}, "labeler: must be a name of 1-64 characters on one line"),
    ({"labeler": "a\nb"}, "labeler: must be a name"),
    ({"sample": 9}, "sample: run rated has no completion at step 1, group 0, sample 9"),
])
def test_bad_input_is_one_line_naming_the_field(run, kwargs, message):
    args = {"step": 1, "group": 0, "sample": 0, "score": 1, "labeler": "ann", **kwargs}
    with pytest.raises(labels.LabelError) as err:
        labels.add(run, **args)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert labels.read(run).empty


def test_bad_scale_and_damaged_files(run):
    with pytest.raises(labels.LabelError, match="^scale: must be one of thumbs, 1-5, got '1-10'$"):
        labels.set_scale(run, "1-10")
    labels.add(run, step=1, group=0, sample=1, score=0, labeler="ann")
    (run / "labels" / "ratings" / "zz-broken.json").write_text("{not json")
    (run / "labels" / "ratings" / "zz-other.json").write_text('{"step": "1", "labeler": 3}')
    (run / "labels" / "settings.json").write_text('{"scale": "1-100"}')
    assert len(labels.read(run)) == 1 and labels.settings(run)["scale"] == "thumbs"


WRITER = """
import sys
from grpo_lab.rundir import labels
run, who = sys.argv[1], sys.argv[2]
for i in range(60):
    labels.add(run, step=1 + i % 2, group=(i // 2) % 2, sample=(i // 4) % 4, score=i % 2, labeler=f"{who}{i}")
"""


def test_two_processes_rating_at_once_lose_nothing(run):
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(run), who]) for who in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    df = labels.read(run, history=True)
    assert len(df) == 120 and df["labeler"].nunique() == 120  # every rating of both, none overwritten
    assert len(labels.read(run)) == 120


def test_waiting_step_can_be_rated_before_it_is_logged(run):
    groups = [{"group": 0, "prompt_id": "7+1", "prompt": "7+1=", "completions": ["8", "9"]}]
    labels.set_waiting(run, step=3, groups=groups, min_groups=1)
    assert labels.waiting(run)["step"] == 3
    labels.add(run, step=3, group=0, sample=1, score=0, labeler="ann")
    row = labels.read(run).iloc[0]
    assert (row.prompt_id, row.completion_sha) == ("7+1", labels.completion_sha("9"))
    labels.clear_waiting(run)
    assert labels.waiting(run) is None
    with pytest.raises(labels.LabelError, match="^sample: run rated has no completion at step 3"):
        labels.add(run, step=3, group=0, sample=0, score=1, labeler="ann")
