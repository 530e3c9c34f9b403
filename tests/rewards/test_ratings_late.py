"""Ratings given after the trainer moved on: the `human` reward waits for every
group of its step by default, says so in status.json, and keeps the moment it read the ratings
(labels/closed.json); a later rating is late: kept, used by the preference export, marked late on the
Groups page, which says before and after a rating whether it can still count."""

from __future__ import annotations

import json
import os

import pytest

from app_helpers import texts
from grpo_lab import rewards
from grpo_lab.dashboard.views.groups import rating
from grpo_lab.finished_runs.preferences import pairs
from grpo_lab.rewards import context
from grpo_lab.rundir import labels
from grpo_lab.rundir.status import StatusFile, read_status
from labels_helpers import fake_run
from trainer_helpers import SMALL, read_table, run_trainer


def test_the_default_waits_for_every_group_and_says_so_in_status(tmp_path, monkeypatch):
    where = context.StepSamples(run_dir=tmp_path, step=1, group_size=2, prompt_ids=["a", "b"], prompts=["a=", "b="])
    StatusFile(tmp_path / "status.json").update(state="running")
    real_read, seen = labels.read, []

    def rate_a_group_per_read(run_dir, *a, **kw):  # a person rates group 0, then (a read later) group 1
        status = read_status(tmp_path / "status.json")
        seen.append(status["waiting"])
        if len(seen) <= 2:
            for i, score in enumerate([1, 0]):
                labels.add(tmp_path, step=1, group=len(seen) - 1, sample=i, score=score, labeler="ann")
        return real_read(run_dir, *a, **kw)

    monkeypatch.setattr(labels, "read", rate_a_group_per_read)
    fn = rewards.build("human", wait_s=60, poll_s=0.01)  # the default min_groups: every group
    with context.scoring(where):
        got = fn(prompts=["a="] * 2 + ["b="] * 2, completions=["1", "2", "3", "4"])
    assert got == [1.0, 0.0, 1.0, 0.0]  # min_groups 1 went on after group 0: group 1 scored None
    assert seen[0]["for"] == "ratings" and seen[0]["step"] == 1 and (seen[0]["groups"], seen[0]["need"]) == (2, 2)
    assert read_status(tmp_path / "status.json")["waiting"] is None  # no longer waiting
    assert read_status(tmp_path / "status.json")["state"] == "running"
    assert 1 in labels.closed_steps(tmp_path)


def test_min_groups_still_waits_for_that_many(tmp_path):
    where = context.StepSamples(run_dir=tmp_path, step=1, group_size=2, prompt_ids=["a", "b"], prompts=["a=", "b="])
    labels.set_waiting(tmp_path, step=1, groups=[{"group": g, "prompt_id": p, "prompt": p, "completions": c}
                                                 for g, p, c in ((0, "a", ["1", "2"]), (1, "b", ["3", "4"]))])
    for i in range(2):
        labels.add(tmp_path, step=1, group=0, sample=i, score=1, labeler="ann")
    with context.scoring(where):
        assert rewards.build("human", min_groups=1, wait_s=60)(["a="] * 4, ["1", "2", "3", "4"]) == [1.0, 1.0, None, None]


@pytest.fixture
def runs(tmp_path):
    run = fake_run(tmp_path, "hitl", completion=lambda step, group, i: f"answer {step}.{group}.{i}")
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "rewards": {"human": 1.0}}))
    return tmp_path


def test_a_rating_after_the_step_was_scored_is_late_and_still_exported(runs):
    run = runs / "hitl"
    labels.add(run, step=2, group=0, sample=0, score=1, labeler="ann")  # in time
    labels.close_step(run, 2, labels.read(run)["time"].max())
    labels.add(run, step=2, group=0, sample=1, score=0, labeler="ann")  # after the trainer read step 2's ratings
    df = labels.read(run)
    assert labels.late(df, run).tolist() == [False, True]
    assert [("answer 2.0.0", "answer 2.0.1")] == list(zip(pairs(run)["chosen"], pairs(run)["rejected"]))
    (run / "labels" / "closed.json").write_text('{"2": "soon", "x": 1, "1": 1e400}')  # damaged: read as not closed
    assert labels.closed_steps(run) == {} and not labels.late(labels.read(run), run).any()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_groups_says_a_trained_steps_ratings_are_late_before_and_after(app, runs, lang):
    run = runs / "hitl"
    labels.close_step(run, 2, 1.0)  # step 2 was scored long ago; the run has ended
    at = app("groups", "hitl", lang=lang, **{rating.LABELER_KEY: "ann"})
    before = texts(at.info)
    at.text_input(key="rate_hitl_2_0_ann_keys").input("1 0 1 1").run()
    after, mine = texts(at.success), texts(at.caption)
    if lang == "en":
        assert "Step 2 was trained at" in before and "is late" in before and "The run has ended." in before
        assert "Saved 4 ratings for step 2, group 0. Late: step 2 was already trained" in after
    else:
        assert "第 2 步已于" in before and "迟到评分" in before and "该运行已结束。" in before
        assert "已保存第 2 步第 0 组的 4 条评分" in after and "迟到：第 2 步已经训练过了" in after
    assert labels.late(labels.read(run), run).all() and len(labels.read(run)) == 4  # kept, marked late
    at.segmented_control(key="groups_mode").set_value("step").run()
    at.number_input(key="groups_step").set_value(2).run()
    at.selectbox(key="groups_pick_2").set_value(0).run()
    assert ("4 of them late" if lang == "en" else "其中 4 条是迟到评分") in texts(at.caption), mine


def test_groups_says_which_step_the_trainer_waits_on_and_shows_it_without_a_name(app, runs):
    run = runs / "hitl"
    status = json.loads((run / "status.json").read_text())
    (run / "status.json").write_text(json.dumps({**status, "state": "running", "pid": os.getpid(),
                                                 "waiting": {"for": "ratings", "step": 3}}))
    labels.set_waiting(run, step=3, min_groups=2, groups=[
        {"group": 0, "prompt_id": "0+3", "prompt": "0+3=", "completions": ["three", "four"]},
        {"group": 1, "prompt_id": "1+3", "prompt": "1+3=", "completions": ["four", "five"]}])
    at = app("groups", "hitl")  # no name typed yet
    assert "waits for ratings of step 3" in texts(at.info) and "count for its reward" in texts(at.info)
    assert "`i=0` three" in texts(at.markdown) and "`i=1` four" in texts(at.markdown)  # readable before a name
    assert "The trainer waits on step 3" in texts(at.info)  # the logged step 2's section: late, rate step 3
    runs_page = app("runs", "hitl")
    assert "waiting for ratings of step 3" in " ".join(map(str, runs_page.dataframe[0].value["state"]))
    zh = app("runs", "hitl", lang="zh")
    assert "等待第 3 步的评分" in " ".join(map(str, zh.dataframe[0].value["state"]))


def test_a_run_waiting_on_its_first_step_shows_one_calm_line(app, tmp_path, monkeypatch):
    run = tmp_path / "alone" / "first"
    run.mkdir(parents=True)
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(run.parent))  # this run alone in its folder
    (run / "config.json").write_text(json.dumps({"name": "first", "algo": "grpo", "group_size": 2, "model": "tiny",
                                                 "max_steps": 3, "rewards": {"human": 1.0}}))
    (run / "status.json").write_text(json.dumps({"state": "running", "step": 0, "total_steps": 3, "name": "first",
                                                 "pid": os.getpid()}))
    labels.set_waiting(run, step=1, groups=[{"group": 0, "prompt_id": "0+1", "prompt": "0+1=",
                                             "completions": ["one", "two"]}])
    for lang in ("en", "zh"):
        at = app("groups", "first", lang=lang)
        assert not at.warning, texts(at.warning)  # no "table 'samples' has no data yet", no "No samples logged yet"
        assert len(at.info) == 1 and ("step 1" in texts(at.info) or "第 1 步" in texts(at.info))
        assert "`i=1` two" in texts(at.markdown)



def test_a_run_nobody_rates_goes_on_after_the_wait_with_a_warning(tmp_path):
    """The page says the trainer goes on after wait_s with what is rated: nobody rating is a warning of
    the run doctor, not a critical stop (a person stepped away; no reward is broken)."""
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"rewards": {"human": 1.0}, "reward_params": {"human": {"wait_s": 0.5}}}))
    result = run_trainer(tmp_path, "away", *SMALL, "--max-steps", "2", "--sft-steps", "1", "--flush-seconds", "0",
                         "--config", str(config))
    events = read_table(tmp_path / "away", "events")
    assert set(events["kind"]) == {"ratings_missing"} and set(events["severity"]) == {"warning"}, events
    status = read_status(tmp_path / "away" / "status.json")
    assert status["step"] == 2, status  # both steps ran: no stop at the first
    assert result.returncode == 1 and "no reward" in status["error"], result.stderr[-2000:]  # never scored at all
