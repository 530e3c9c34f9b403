"""The `human` reward: a live run waits for ratings of its step, and trains on exactly those."""

from __future__ import annotations

import doctest
import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from grpo_lab import rewards
from grpo_lab.rewards import context, human
from grpo_lab.rundir import labels
from grpo_lab.rundir.status import read_status
from grpo_lab.objective.functions import group_advantages
from trainer_helpers import ROOT, SMALL, read_table, start_trainer, trainer_cmd, wait_trainers, wait_until


def test_doctests():
    result = doctest.testmod(human)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize("params, message", [
    ({"min_groups": -1}, "human: min_groups must be a whole number >= 0, got -1"),
    ({"wait_s": "10"}, "human: wait_s must be a number of seconds >= 0, got '10'"),
    ({"poll_s": float("inf")}, "human: poll_s must be a number of seconds >= 0, got inf"),
    ({"nope": 1}, "reward 'human': unknown parameter(s) nope"),
])
def test_bad_params_fail_at_build(params, message):
    with pytest.raises(ValueError) as err:
        rewards.build("human", **params)
    assert str(err.value).startswith(message)


def test_scores_from_ratings_of_this_text_only(tmp_path):
    where = context.StepSamples(run_dir=tmp_path, step=1, group_size=2, prompt_ids=["a"], prompts=["a="])
    fn = rewards.build("human", min_groups=1, wait_s=0)
    labels.set_waiting(tmp_path, step=1, groups=[{"group": 0, "prompt_id": "a", "prompt": "a=",
                                                  "completions": ["old", "y"]}])
    labels.add(tmp_path, step=1, group=0, sample=0, score=1, labeler="ann")  # given for the text "old"
    labels.add(tmp_path, step=1, group=0, sample=1, score=1, labeler="ann")
    labels.add(tmp_path, step=1, group=0, sample=1, score=0, labeler="bob")
    with context.scoring(where):
        got = fn(prompts=["a=", "a="], completions=["new", "y"])  # sample 0 came out differently this time
    assert got == [None, 0.5]
    assert labels.waiting(tmp_path) is None  # the reward clears its waiting record


def wait_under_a_trainer(where, wait_s: float) -> tuple[list, float, list[int]]:
    """wait_for_ratings of ["x", "y"] (one group wanted) with a SIGTERM handler standing in for the
    trainer's: (scores, seconds waited, the signals that handler got)."""
    stops: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: stops.append(signum))
    try:
        scores, waited = human.wait_for_ratings(where, ["x", "y"], min_groups=1, wait_s=wait_s, poll_s=0.01)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return scores, waited, stops


def test_ratings_given_just_before_a_stop_are_used(tmp_path, monkeypatch):
    """The race CI met: the trainer reads (nothing rated), ratings land, then the stop arrives; the
    step must still train on those ratings, so a stop is followed by one more read."""
    where = context.StepSamples(run_dir=tmp_path, step=1, group_size=2, prompt_ids=["a"], prompts=["a="])
    real_read, reads = labels.read, []

    def read_then_rate_then_stop(run_dir, *a, **kw):
        df = real_read(run_dir, *a, **kw)
        if not reads:
            for i, score in enumerate([1, 0]):
                labels.add(tmp_path, step=1, group=0, sample=i, score=score, labeler="ann")
            os.kill(os.getpid(), signal.SIGTERM)
        reads.append(len(df))
        return df

    monkeypatch.setattr(labels, "read", read_then_rate_then_stop)
    scores, waited, stops = wait_under_a_trainer(where, wait_s=600)
    assert stops == [signal.SIGTERM]  # the trainer's own handler still ran
    assert scores == [1.0, 0.0] and reads == [0, 2] and waited < 60


def test_a_stop_right_after_the_waiting_record_shows_ends_the_wait(tmp_path, monkeypatch):
    """The race CI met: a stop sent as soon as labels/waiting.json shows (the dashboard's Stop, a
    test) reached the trainer before the wait had put in its stop handler, so it waited out wait_s."""
    where = context.StepSamples(run_dir=tmp_path, step=1, group_size=2, prompt_ids=["a"], prompts=["a="])
    real_set_waiting = labels.set_waiting

    def set_waiting_then_stop(*a, **kw):
        real_set_waiting(*a, **kw)
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(labels, "set_waiting", set_waiting_then_stop)
    scores, waited, stops = wait_under_a_trainer(where, wait_s=20)
    assert stops == [signal.SIGTERM] and scores == [None, None]
    assert waited < 10  # not the 20 s wait_s
    assert labels.waiting(tmp_path) is None


def test_a_stop_asked_before_the_wait_began_ends_it_at_once(tmp_path):
    """A stop that reached the trainer while it sampled came before the wait's own handler: the
    wait asks the trainer (stop_requested) instead of waiting out wait_s for a signal already gone."""
    where = context.StepSamples(run_dir=tmp_path, step=1, group_size=2, prompt_ids=["a"], prompts=["a="],
                                stop_requested=lambda: True)
    labels.set_waiting(tmp_path, step=1, groups=[{"group": 0, "prompt_id": "a", "prompt": "a=",
                                                  "completions": ["x", "y"]}])
    labels.add(tmp_path, step=1, group=0, sample=0, score=1, labeler="ann")  # rated while sampling went on
    scores, waited = human.wait_for_ratings(where, ["x", "y"], min_groups=1, wait_s=20, poll_s=0.01)
    assert scores == [1.0, None] and waited < 10  # what was rated, read once; not the 20 s wait_s
    assert labels.waiting(tmp_path) is None


# python -m grpo_lab.trainer, whose step-1 sampling ends with a SIGTERM to itself: a stop given
# during sampling, before the human reward's wait (and its stop handler) begins
STOP_WHILE_SAMPLING = """
import os, signal, sys
from grpo_lab.trainer import sampling
from grpo_lab.trainer.__main__ import main

sample = sampling.sample
def sample_then_stop(*args, **kwargs):
    out = sample(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGTERM)
    return out
sampling.sample = sample_then_stop
sys.exit(main(sys.argv[1:]))
"""


def test_a_stop_during_sampling_does_not_wait_for_ratings(tmp_path):
    config = tmp_path / "human.json"
    config.write_text(json.dumps({"rewards": {"human": 1.0},
                                  "reward_params": {"human": {"wait_s": 600, "poll_s": 0.1}}}))
    script = tmp_path / "stop_while_sampling.py"
    script.write_text(STOP_WHILE_SAMPLING)
    runs = tmp_path / "runs"
    cmd = [sys.executable, str(script), *trainer_cmd(runs, "early", *SMALL, "--max-steps", "3",
                                                      "--config", str(config))[3:]]
    began = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert time.monotonic() - began < 200  # start-up and one step; not the 600 s wait
    status = read_status(runs / "early" / "status.json")
    assert status["state"] == "stopped" and status["step"] == 1
    assert read_table(runs / "early", "samples")["rewards/human"].isna().all()  # nobody rated: no score


def test_live_run_trains_on_the_ratings_given_while_it_waits(tmp_path):
    config = tmp_path / "human.json"
    config.write_text(json.dumps({"rewards": {"human": 1.0},
                                  "reward_params": {"human": {"min_groups": 2, "wait_s": 15, "poll_s": 0.1}}}))
    runs = tmp_path / "runs"
    proc = start_trainer(runs, "hitl", *SMALL, "--max-steps", "2", "--config", str(config))
    run = runs / "hitl"
    given: dict[tuple[int, int, int], float] = {}

    def rate(step, group, scores, labeler="ann"):
        for i, score in enumerate(scores):
            if score is not None:
                labels.add(run, step=step, group=group, sample=i, score=score, labeler=labeler)

    waiting = wait_until(lambda: labels.waiting(run), 240, "the trainer to wait for step 1's ratings", alive=proc)
    assert waiting["step"] == 1 and waiting["min_groups"] == 2 and len(waiting["groups"]) == 4
    assert [len(g["completions"]) for g in waiting["groups"]] == [4] * 4
    # a partial group first (the trainer goes on once two groups are whole), then two whole ones
    rate(1, 3, [1, None, 0, None])
    rate(1, 0, [1, 0, 0, 1])
    rate(1, 0, [None, 1, None, None], labeler="bob")  # a second person: sample 1 scores their mean, 0.5
    rate(1, 1, [0, 0, 0, 0])
    given.update({(1, 3, 0): 1.0, (1, 3, 2): 0.0, (1, 0, 0): 1.0, (1, 0, 1): 0.5, (1, 0, 2): 0.0, (1, 0, 3): 1.0,
                  **{(1, 1, i): 0.0 for i in range(4)}})
    # step 2: one whole group only, so the trainer waits its full wait_s, then goes on with that group
    wait_until(lambda: (labels.waiting(run) or {}).get("step") == 2, 120, "step 2's wait", alive=proc)
    rate(2, 2, [1, 1, 0, 1])
    given.update({(2, 2, 0): 1.0, (2, 2, 1): 1.0, (2, 2, 2): 0.0, (2, 2, 3): 1.0})
    wait_trainers([proc], timeout=240)

    samples = read_table(run, "samples")
    assert len(samples) == 2 * 4 * 4
    for (step, group), g in samples.groupby(["step", "group"]):
        g = g.sort_values("sample_idx")
        expected = [given.get((step, group, i)) for i in range(4)]
        got = [None if math.isnan(v) else v for v in g["rewards/human"]]
        assert got == expected, (step, group)
        totals = torch.tensor([[math.nan if v is None else v for v in expected]])
        assert g["advantage"].tolist() == pytest.approx(group_advantages(totals).advantages[0].tolist(), abs=1e-5)
    # the ratings name the texts the step trained on
    rated = labels.read(run).merge(samples, on=["step", "group", "sample_idx"])
    assert (rated["completion_sha"] == rated["completion"].map(labels.completion_sha)).all()
    scalars = read_table(run, "scalars")
    assert scalars["rewards/log/human_wait_s"].iloc[1] >= 15  # step 2 waited out its wait_s
    assert scalars["time/reward_s"].iloc[1] >= 15  # and the wait shows in the phase timings
    assert labels.waiting(run) is None


def test_a_stop_while_waiting_ends_the_wait_and_the_run_at_once(tmp_path):
    config = tmp_path / "human.json"
    config.write_text(json.dumps({"rewards": {"human": 1.0},
                                  "reward_params": {"human": {"min_groups": 4, "wait_s": 600, "poll_s": 0.1}}}))
    runs = tmp_path / "runs"
    proc = start_trainer(runs, "stopme", *SMALL, "--max-steps", "3", "--config", str(config))
    run = runs / "stopme"
    wait_until(lambda: labels.waiting(run), 240, "the trainer to wait for step 1's ratings", alive=proc)
    for i, score in enumerate([1, 0, 1, 1]):
        labels.add(run, step=1, group=2, sample=i, score=score, labeler="ann")
    asked = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    wait_trainers([proc], timeout=120)
    assert time.monotonic() - asked < 60  # not the 600 s wait
    status = read_status(run / "status.json")
    assert status["state"] == "stopped" and status["step"] == 1
    samples = read_table(run, "samples")
    rated = samples[samples["group"] == 2].sort_values("sample_idx")
    assert rated["rewards/human"].tolist() == [1.0, 0.0, 1.0, 1.0]
    assert samples[samples["group"] != 2]["rewards/human"].isna().all()
    assert (run / "checkpoints" / "step-00000001" / "meta.json").is_file()
