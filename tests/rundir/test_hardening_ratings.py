"""Ratings are data with a schema (grpo_lab/rundir/labels.py): a rating file that does not fit the run's
scale or group is skipped with one line naming it and the field, counted on the Groups page, never raised;
the `human` reward never hands the trainer a non-finite reward; loose files are compacted into a Parquet
part without changing what is read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from safetensors.torch import load_file

from app_helpers import texts
from grpo_lab import rewards
from grpo_lab.rewards import context
from grpo_lab.rundir import labels
from labels_helpers import fake_run
from trainer_helpers import ROOT, SMALL, read_table, start_trainer, wait_trainers, wait_until

SHA = labels.completion_sha("xxx")  # fake_run's step 1, group 0, sample 2
GOOD = {"step": 1, "group": 0, "sample_idx": 2, "prompt_id": "0+1", "completion_sha": SHA, "score": 1.0,
        "rank": None, "labeler": "ann", "time": 1.0, "undone": False}


@pytest.fixture
def runs(tmp_path):
    fake_run(tmp_path, "rated")  # groups of 4, thumbs
    return tmp_path


def plant(run, name: str, content: str) -> None:
    folder = run / "labels" / "ratings"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(content)


BAD = [  # (file content, the problem line after "ratings/bad.json")
    (json.dumps({**GOOD, "score": 1e308}), ": score: a whole number 0..1 (the run's scale is 'thumbs'), got 1e+308"),
    (json.dumps({**GOOD, "score": math.nan}), ": score: a whole number 0..1 (the run's scale is 'thumbs'), got nan"),
    (json.dumps({**GOOD, "score": "1"}), ": score: a whole number 0..1 (the run's scale is 'thumbs'), got '1'"),
    (json.dumps({**GOOD, "score": 0.5}), ": score: a whole number 0..1 (the run's scale is 'thumbs'), got 0.5"),
    (json.dumps({**GOOD, "score": None, "rank": 1.5}), ": rank: a whole number 1..4 (a place in the group), got 1.5"),
    (json.dumps({**GOOD, "score": None, "rank": 5}), ": rank: a whole number 1..4 (a place in the group), got 5"),
    (json.dumps({**GOOD, "step": 10**30}), f": step: a whole number 0..{labels.MAX_INDEX}, got 10000000000000"),
    (json.dumps({**GOOD, "group": -1}), f": group: a whole number 0..{labels.MAX_INDEX}, got -1"),
    (json.dumps({**GOOD, "sample_idx": 4}), ": sample_idx: a whole number 0..3, got 4"),
    (json.dumps({**GOOD, "undone": "no"}), ": undone: true or false, got 'no'"),
    (json.dumps({**GOOD, "labeler": "a\nb"}), ": labeler: must be a name of 1-64 characters on one line"),
    (json.dumps({**GOOD, "time": "now"}), ": time: Unix seconds (a number >= 0), got 'now'"),
    (json.dumps({**GOOD, "prompt_id": ["x"]}), ": prompt_id: text of at most 1000 characters, or null, got ['x']"),
    (json.dumps({**GOOD, "score": None}), ": score: a rating gives a score or a rank (both null)"),
    (json.dumps([GOOD]), ": not a rating record (a JSON object), got list"),
    ("[" * 100_000 + "]" * 100_000, " is larger than 4 KB, so it is not read"),
    ("[" * 2000 + "]" * 2000, " is nested deeper than 2 levels, so it is not read"),
    ('{"step": 1', " is not valid JSON"),
]


@pytest.mark.parametrize("content, problem", BAD, ids=[p.split(":")[1].strip() if ":" in p else p[:20] for _, p in BAD])
def test_a_bad_rating_file_is_skipped_with_one_line_and_the_rest_count(runs, content, problem):
    run = runs / "rated"
    plant(run, "good.json", json.dumps(GOOD))
    plant(run, "bad.json", content)
    df, problems = labels.read_checked(run)
    assert df[["step", "group", "sample_idx", "score", "labeler"]].values.tolist() == [[1, 0, 2, 1.0, "ann"]]
    assert len(problems) == 1 and problems[0].startswith("ratings/bad.json" + problem), problems
    assert "\n" not in problems[0]


def test_the_scale_is_checked_on_every_read(runs):
    """A 4 is a rating on 1-5 and a bad file on thumbs: the run's scale now decides, whenever it was given."""
    run = runs / "rated"
    plant(run, "four.json", json.dumps({**GOOD, "score": 4.0}))
    assert labels.read(run).empty
    labels.set_scale(run, "1-5")
    assert labels.read(run)["score"].tolist() == [4.0]


def part(run, rows: list[dict], name: str = "ratings-00000000000000000001-1.parquet") -> None:
    table = pa.Table.from_pylist([{"file": f"{i:020d}-1-planted.json", **r} for i, r in enumerate(rows)],
                                 schema=labels.PART_SCHEMA)
    (run / "labels").mkdir(exist_ok=True)
    pq.write_table(table, run / "labels" / name)


def test_a_planted_part_is_checked_row_by_row_like_the_files(runs):
    run = runs / "rated"
    part(run, [GOOD, {**GOOD, "score": math.nan}, {**GOOD, "score": 1e308}, {**GOOD, "score": None, "rank": 9},
               {**GOOD, "undone": None}, {**GOOD, "score": None}])
    (run / "labels" / "ratings-00000000000000000002-1.parquet").write_text("not parquet")
    df, problems = labels.read_checked(run)
    assert len(df) == 1 and df["score"].tolist() == [1.0]
    assert [p.split(": ", 1)[1] for p in problems[1:]] == [
        "score: a whole number 0..1 (the run's scale is 'thumbs'), got nan; skipped",
        "score: a whole number 0..1 (the run's scale is 'thumbs'), got 1e+308; skipped",
        "rank: a whole number 1..4 (a place in the group), got 9; skipped",
        "undone: true or false, got None; skipped",
        "score: a rating gives a score or a rank (both null); skipped"]
    assert problems[0].startswith("labels/ratings-00000000000000000002-1.parquet: not a ratings part (")


def test_the_human_reward_never_hands_the_trainer_a_non_finite_reward(tmp_path):
    where = context.StepSamples(run_dir=tmp_path, step=1, group_size=2, prompt_ids=["a"], prompts=["a="])
    texts_ = ["x", "y"]
    for i, (score, who) in enumerate([(1e308, "mallory"), (math.nan, "mallory"), (math.inf, "eve"), (1.0, "ann")]):
        plant(tmp_path, f"{i:020d}-1-r.json", json.dumps({**GOOD, "group": 0, "sample_idx": i % 2, "score": score,
                                                          "labeler": who, "prompt_id": "a",
                                                          "completion_sha": labels.completion_sha(texts_[i % 2])}))
    fn = rewards.build("human", min_groups=0, wait_s=0)
    with context.scoring(where):
        got = fn(prompts=["a=", "a="], completions=texts_)
    assert got == [None, 1.0]


# --- compaction ------------------------------------------------------------------------------------


def append(run, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        labels._append(run, {**GOOD, "group": i % 2, "sample_idx": i % 4, "labeler": f"p{i}", "time": time.time(),
                             "score": float(i % 2), "undone": i % 5 == 4})


def test_enough_loose_files_are_folded_into_one_part_and_read_the_same(runs):
    run = runs / "rated"
    append(run, labels.COMPACT_AT + 6)
    plant(run, "zz-bad.json", json.dumps({**GOOD, "score": 1e308}))
    labels.COMPACT_AT += 100
    try:
        before, problems_before = labels.read_checked(run, history=True)  # loose: not folded yet
    finally:
        labels.COMPACT_AT -= 100
    after, problems = labels.read_checked(run, history=True)  # folds them, then reads the part
    assert [p.name for p in (run / "labels").glob("*.parquet")] and \
        sorted(p.name for p in (run / "labels" / "ratings").iterdir()) == ["zz-bad.json"]  # the bad one stays
    assert after.equals(before) and len(after) == labels.COMPACT_AT + 6
    assert problems == problems_before == ["ratings/zz-bad.json: score: a whole number 0..1 (the run's scale is "
                                           "'thumbs'), got 1e+308; skipped"]
    assert labels.read(run).equals(labels.read(run))


def test_undo_after_compaction_still_cancels_the_folded_rating(runs):
    run = runs / "rated"
    append(run, labels.COMPACT_AT)
    labels.add(run, step=1, group=0, sample=2, score=1, labeler="ann")
    assert labels.compact(run) and "ann" in labels.read(run)["labeler"].tolist()
    labels.undo(run, step=1, group=0, sample=2, labeler="ann")
    assert "ann" not in labels.read(run)["labeler"].tolist()
    assert labels.read(run, history=True)["labeler"].tolist().count("ann") == 2


def test_a_compaction_killed_before_deleting_its_files_counts_each_rating_once(runs):
    run = runs / "rated"
    append(run, 10)
    names = sorted((run / "labels" / "ratings").iterdir())
    kept = {p.name: p.read_text() for p in names}
    assert labels.compact(run)
    for name, text in kept.items():  # as if killed after writing the part, before the unlinks
        plant(run, name, text)
    assert len(labels.read(run, history=True)) == 10


def test_a_reader_folding_while_a_writer_writes_loses_nothing(runs):
    """A second process appends 300 ratings while this one reads (and compacts) in a loop."""
    run = runs / "rated"
    writer = ("import sys, time\nfrom grpo_lab.rundir import labels\n"
              f"for i in range(300):\n    labels._append(sys.argv[1], {{**{GOOD!r}, 'labeler': f'w{{i}}', 'time': time.time()}})\n")
    proc = subprocess.Popen([sys.executable, "-c", writer, str(run)], cwd=ROOT)
    seen = 0
    while proc.poll() is None:
        count = len(labels.read(run, history=True))
        assert count >= seen  # a rating once read never disappears from a later read
        seen = count
    assert proc.returncode == 0
    assert len(labels.read(run, history=True)) == 300 and list((run / "labels").glob("*.parquet"))


def test_the_groups_page_counts_and_names_the_skipped_files(app, runs):
    run = runs / "rated"
    labels.add(run, step=2, group=0, sample=0, score=1, labeler="ann")
    plant(run, "zz-huge.json", json.dumps({**GOOD, "score": 1e308}))
    plant(run, "zz-deep.json", "[" * 100_000 + "]" * 100_000)
    at = app("groups", "rated")
    assert not at.exception, [e.message for e in at.exception]
    shown = texts(at.warning)
    assert "2 rating file(s) skipped" in shown and "zz-huge.json" in shown and "zz-deep.json" in shown, shown


# --- a live run of the human reward, rated with poison -------------------------------------------------


def test_poisoned_ratings_leave_a_human_run_finished_with_finite_weights(tmp_path):
    config = tmp_path / "human.json"
    config.write_text(json.dumps({"rewards": {"human": 1.0},
                                  "reward_params": {"human": {"min_groups": 1, "wait_s": 30, "poll_s": 0.1}}}))
    runs = tmp_path / "runs"
    proc = start_trainer(runs, "poisoned", *SMALL, "--max-steps", "1", "--config", str(config))
    run = runs / "poisoned"
    waiting = wait_until(lambda: labels.waiting(run), 240, "the trainer to wait for step 1's ratings", alive=proc)
    texts0 = waiting["groups"][0]["completions"]
    base = {**GOOD, "prompt_id": waiting["groups"][0]["prompt_id"], "labeler": "mallory", "time": time.time()}
    for i, change in enumerate([{"score": 1e308}, {"score": math.nan}, {"score": "1"}, {"score": None, "rank": 1.5},
                                {"step": 10**30}, {"undone": "no", "score": 1e308}]):
        sample = i % len(texts0)
        plant(run, f"{time.time_ns():020d}-0-p{i}.json",
              json.dumps({**base, "sample_idx": sample, "completion_sha": labels.completion_sha(texts0[sample]),
                          **change}))
    plant(run, f"{time.time_ns():020d}-0-deep.json", "[" * 100_000 + "]" * 100_000)
    for i in range(len(texts0)):  # one whole group of real ratings: the step goes on
        labels.add(run, step=1, group=1, sample=i, score=i % 2, labeler="ann")
    wait_trainers([proc], timeout=240)

    assert json.loads((run / "status.json").read_text())["state"] == "finished"
    samples = read_table(run, "samples")
    human = samples["rewards/human"].dropna()
    assert len(human) == len(texts0) and human.map(math.isfinite).all()
    assert samples["advantage"].map(math.isfinite).all()
    weights = load_file(str(run / "checkpoints" / "step-00000001" / "model.safetensors"))
    assert all(torch.isfinite(w).all() for w in weights.values())


def test_bad_files_alone_never_start_a_compaction(runs):
    """They stay loose files (nothing is deleted), so they must not make every read fold again."""
    run = runs / "rated"
    for i in range(labels.COMPACT_AT + 1):
        plant(run, f"{i:020d}-0-bad.json", json.dumps({**GOOD, "undone": "no"}))
    df, problems = labels.read_checked(run)
    assert df.empty and len(problems) == labels.COMPACT_AT + 1
    assert not list((run / "labels").glob("*.parquet"))
