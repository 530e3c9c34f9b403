"""Rating on the Groups page (grpo_lab/dashboard/views/groups/rating.py) under AppTest: the ratings land in labels.read."""

from __future__ import annotations

import json
import os

import pytest

from app_helpers import texts
from grpo_lab.dashboard.views.groups import rating
from grpo_lab.rundir import labels
from labels_helpers import fake_run


@pytest.fixture
def runs(tmp_path):
    fake_run(tmp_path, "rated", completion=lambda step, group, i: f"answer {step}.{group}.{i}")
    return tmp_path


def test_parse_scores():
    assert rating.parse_scores("1,0 - 1", 4, "thumbs") == [1, 0, None, 1]
    assert rating.parse_scores("5 4", 2, "1-5") == [5, 4]
    for text, message in [("1 0", "scores: type 4 scores"), ("1 0 2 1", "scores: '2' is not on the scale thumbs"),
                          ("0 1 2 3", "scores: '0' is not on the scale 1-5")]:
        with pytest.raises(labels.LabelError, match=f"^{message}"):
            rating.parse_scores(text, 4, "1-5" if "1-5" in message else "thumbs")


def heading(at) -> str:
    return texts(at.subheader)


def test_rate_a_group_with_the_keyboard_then_the_next_one_with_a_click(app, runs):
    run = runs / "rated"
    at = app("groups", "rated")
    assert "step 2 · group 0" in heading(at).lower() or "group 0" in heading(at)
    assert "Type your name" in texts(at.caption)
    at.text_input(key=rating.LABELER_KEY).input("ann").run()
    assert at.query_params.get("labeler") == ["ann"] or at.query_params.get("labeler") == "ann"
    at.text_input(key="rate_rated_2_0_ann_keys").input("1 0 - 1").run()
    assert not at.exception, [e.message for e in at.exception]
    df = labels.read(run)
    assert sorted(zip(df["step"], df["group"], df["sample_idx"], df["score"])) == [
        (2, 0, 0, 1.0), (2, 0, 1, 0.0), (2, 0, 3, 1.0)]
    assert (df["completion_sha"] == [labels.completion_sha(f"answer 2.0.{i}") for i in df["sample_idx"]]).all()
    assert "Saved 3 ratings for step 2, group 0" in texts(at.success)
    assert "group 1" in heading(at)  # moved on to the next group ann has not rated
    at.segmented_control(key="rate_rated_2_1_ann_2_thumbs").set_value(0).run()
    mine = labels.read(run).query("group == 1")
    assert mine[["sample_idx", "score", "labeler"]].values.tolist() == [[2, 0.0, "ann"]]
    at.segmented_control(key="rate_rated_2_1_ann_2_thumbs").set_value(None).run()  # undo
    assert labels.read(run).query("group == 1").empty
    at.button(key="rating_next").click().run()  # skips (2, 0), rated: wraps round to step 1
    assert "step 1" in heading(at).lower() and "group 0" in heading(at)
    assert not at.warning and not at.exception  # moving the finder leaves no "set via Session State" warning


def test_the_1_to_5_scale_is_kept_in_the_run(app, runs):
    at = app("groups", "rated", **{rating.LABELER_KEY: "bob"})
    at.segmented_control(key="rating_scale_rated").set_value("1-5").run()
    assert labels.settings(runs / "rated")["scale"] == "1-5"
    at.text_input(key="rate_rated_2_0_bob_keys").input("5 4 3 2").run()
    assert labels.read(runs / "rated")["score"].tolist() == [5.0, 4.0, 3.0, 2.0]
    at.text_input(key="rate_rated_2_1_bob_keys").input("5 4 3 0").run()
    assert "'0' is not on the scale 1-5" in texts(at.error)
    labels.add(runs / "rated", step=2, group=0, sample=0, score=1, labeler="cy")
    labels.add(runs / "rated", step=2, group=0, sample=1, score=2, labeler="cy")
    at.run()
    assert "Ratings of this run: 6 from 2 labeler(s)" in " ".join(e.label for e in at.expander)
    table = next(d.value for d in at.dataframe if "labeler_a" in d.value)  # bob 5 > 4, cy 1 < 2: ordered apart
    assert table.values.tolist() == [["bob", "cy", 1, 0.0]]


def test_a_waiting_trainer_shows_its_step_on_groups_and_live(app, runs):
    run = runs / "rated"
    status = json.loads((run / "status.json").read_text())
    (run / "status.json").write_text(json.dumps({**status, "state": "running", "pid": os.getpid()}))
    labels.set_waiting(run, step=3, min_groups=1, groups=[
        {"group": 0, "prompt_id": "0+3", "prompt": "0+3=", "completions": ["3", "4"]},
        {"group": 1, "prompt_id": "1+3", "prompt": "1+3=", "completions": ["4", "5"]}])
    live = app("live", "rated")
    assert "waits for ratings of step 3" in texts(live.warning)
    at = app("groups", "rated", **{rating.LABELER_KEY: "ann"})
    assert "waits for ratings of step 3: 0 group(s) fully rated" in texts(at.info)  # calm: nothing is wrong
    at.text_input(key="rate_rated_3_0_ann_keys").input("10").run()
    df = labels.read(run)
    assert df[["step", "group", "sample_idx", "score"]].values.tolist() == [[3, 0, 0, 1.0], [3, 0, 1, 0.0]]
    assert at.selectbox(key="rating_wait_pick_3@en").value == 1  # on to the next unrated group
    assert "1 group(s) fully rated" in texts(at.info)
    labels.clear_waiting(run)
    assert "waits for ratings" not in texts(app("groups", "rated").info)


def test_rating_in_chinese(app, runs):
    at = app("groups", "rated", lang="zh", **{rating.LABELER_KEY: "安"})
    assert "为这一组打分" in " ".join(e.label for e in at.expander)
    at.text_input(key="rate_rated_2_0_安_keys").input("1 1 0 0").run()
    assert "已保存第 2 步第 0 组的 4 条评分" in texts(at.success)
    assert labels.read(runs / "rated")["labeler"].unique().tolist() == ["安"]


def test_rank_a_group_best_first(app, runs):
    from grpo_lab.finished_runs.preferences import pairs

    assert rating.parse_order("3>1>0", 4) == [3, 1, 0] and rating.parse_order("310", 4) == [3, 1, 0]
    for text, message in [("4", "order: sample indices 0..3, best first, got '4'"), ("1 1", "order: each sample once")]:
        with pytest.raises(labels.LabelError, match=f"^{message}"):
            rating.parse_order(text, 4)
    at = app("groups", "rated", **{rating.LABELER_KEY: "ann"})
    at.text_input(key="rate_rated_2_0_ann_order").input("3 1 0").run()
    assert "Ranked 3 completions of step 2, group 0." in texts(at.success)
    df = labels.read(runs / "rated")
    assert dict(zip(df["sample_idx"], df["rank"])) == {3: 1, 1: 2, 0: 3}
    got = pairs(runs / "rated")
    assert sorted(zip(got["chosen"], got["rejected"])) == sorted([
        ("answer 2.0.3", "answer 2.0.1"), ("answer 2.0.3", "answer 2.0.0"), ("answer 2.0.1", "answer 2.0.0")])


def test_an_imported_verl_run_is_rated_the_same_way(app, runs, tmp_path):
    import importlib

    dump = tmp_path / "verl-dump"  # verl's rollout dump: <step>.jsonl, one object per completion
    dump.mkdir()
    rows = [{"input": f"user: {p}+1?\nassistant:", "output": f"{p + 1}{'!' * k}", "score": float(k == 0), "step": 1}
            for p in range(2) for k in range(4)]
    (dump / "1.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    cli = importlib.import_module("grpo_lab.rundir.import")
    assert cli.main([str(dump), "--name", "verl-run", "--runs-dir", str(runs)]) == 0
    at = app("groups", "verl-run", **{rating.LABELER_KEY: "ann"})
    key = next(w.key for w in at.text_input if w.key and w.key.startswith("rate_verl-run_1_") and w.key.endswith("_keys"))
    at.text_input(key=key).input("1 0 0 0").run()
    df = labels.read(runs / "verl-run")
    assert len(df) == 4 and df["score"].tolist() == [1.0, 0.0, 0.0, 0.0]
    from grpo_lab.finished_runs.preferences import rated_completions
    assert len(rated_completions(runs / "verl-run")) == 4  # every rating names the logged text
