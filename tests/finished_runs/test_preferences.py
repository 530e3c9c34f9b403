"""Ratings as preference pairs, TRL's preference JSONL out and in (grpo_lab/finished_runs/preferences.py)."""

from __future__ import annotations

import doctest
import json
import subprocess
import sys

import pytest

from grpo_lab.finished_runs import preferences
from grpo_lab.rundir import labels
from labels_helpers import fake_run


@pytest.fixture
def run(tmp_path):
    return fake_run(tmp_path, steps=1, groups=2, G=3, completion=lambda step, group, i: f"{group}{'x' * i}")


def test_doctests():
    result = doctest.testmod(preferences)
    assert result.failed == 0 and result.attempted > 0


def test_pairs_from_scores_and_ranks(run):
    # group 0 by score: two labelers, sample 1 mean 0.5 (ann 1, bob 0); ties give no pair
    for sample, score in enumerate([1, 1, 0]):
        labels.add(run, step=1, group=0, sample=sample, score=score, labeler="ann")
    labels.add(run, step=1, group=0, sample=1, score=0, labeler="bob")
    # group 1 by rank (1 best): 2 > 0 > 1
    for sample, rank in enumerate([2, 3, 1]):
        labels.add(run, step=1, group=1, sample=sample, rank=rank, labeler="ann")
    got = preferences.pairs(run)
    assert sorted(zip(got["group"], got["chosen"], got["rejected"], got["source"])) == [
        (0, "0", "0x", "score"), (0, "0", "0xx", "score"), (0, "0x", "0xx", "score"),
        (1, "1", "1x", "rank"), (1, "1xx", "1", "rank"), (1, "1xx", "1x", "rank")]
    assert set(got["prompt"]) == {"0+1=", "1+1="}


def test_a_rating_of_another_text_makes_no_pair(run):
    labels.add(run, step=1, group=0, sample=0, score=1, labeler="ann")
    labels.add(run, step=1, group=0, sample=1, score=0, labeler="ann")
    files = sorted((run / "labels" / "ratings").iterdir())
    record = json.loads(files[0].read_text())
    files[0].write_text(json.dumps({**record, "completion_sha": labels.completion_sha("something else")}))
    assert preferences.pairs(run).empty


def test_export_then_import_round_trip(run, tmp_path):
    for sample, score in enumerate([1, 0, 0]):
        labels.add(run, step=1, group=0, sample=sample, score=score, labeler="ann")
    out = tmp_path / "prefs.jsonl"
    cli = [sys.executable, "-m", "grpo_lab.finished_runs.preferences"]
    done = subprocess.run([*cli, "export", str(run), "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0 and "wrote 2 preference pairs" in done.stdout, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows == [{"prompt": "0+1=", "chosen": "0", "rejected": "0x"},
                    {"prompt": "0+1=", "chosen": "0", "rejected": "0xx"}]
    back = tmp_path / "runs" / "imported"
    done = subprocess.run([*cli, "import", str(back), str(out), "--labeler", "trl"], capture_output=True, text=True)
    assert done.returncode == 0 and "imported 2 preference pairs" in done.stdout, done.stderr
    again = preferences.pairs(back)
    assert sorted(zip(again["chosen"], again["rejected"])) == [("0", "0x"), ("0", "0xx")]
    assert set(labels.read(back)["labeler"]) == {"trl"}
    done = subprocess.run([*cli, "import", str(back), str(out)], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("error: run_dir: ") and "exists" in done.stderr


def test_conversational_prompts_export_as_messages():
    chat = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2=<|im_end|>\n<|im_start|>assistant\n"
    df = preferences.pd.DataFrame([{"prompt": chat, "chosen": "4", "rejected": "5"}])
    assert preferences.to_trl(df) == [{"prompt": [{"role": "system", "content": "Be brief."},
                                                  {"role": "user", "content": "2+2="}],
                                       "chosen": [{"role": "assistant", "content": "4"}],
                                       "rejected": [{"role": "assistant", "content": "5"}]}]


@pytest.mark.parametrize("line, message", [
    ("not json", "line 1: not JSON"),
    ('{"prompt": "a", "chosen": "b"}', r"line 1: needs prompt, chosen and rejected \(or chosen and rejected, the "
                                       r"prompt implicit\); missing rejected"),
    ('{"prompt": 3, "chosen": "b", "rejected": "c"}', "line 1: prompt must be text or a list of messages"),
])
def test_import_refuses_bad_lines(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(labels.LabelError, match=f"^{message}"):
        preferences.import_jsonl(tmp_path / "new", path, "ann")
    assert not (tmp_path / "new").exists()


def test_agreement_between_labelers(run):
    for who, scores in (("ann", [1, 0, 1]), ("bob", [1, 0, 0]), ("cat", [0, 1, 1])):
        for sample, score in enumerate(scores):
            labels.add(run, step=1, group=0, sample=sample, score=score, labeler=who)
    got = preferences.agreement(run)
    assert got.values.tolist() == [["ann", "bob", 1, 1.0], ["ann", "cat", 1, 0.0], ["bob", "cat", 2, 0.0]]
