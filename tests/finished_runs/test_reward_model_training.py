"""grpo-lab-train-rm: trains on a run's ratings and writes a model the reward_model reward loads unchanged."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from grpo_lab import rewards
from grpo_lab.finished_runs.preferences import pairs, split_by_prompt
from grpo_lab.rundir import labels
from labels_helpers import fake_run

CLI = [sys.executable, "-m", "grpo_lab.finished_runs.reward_model_training"]


@pytest.fixture(scope="module")
def rated(tmp_path_factory):
    """8 steps x 2 groups x 3 completions of lengths 1-3, ranked shortest first."""
    run = fake_run(tmp_path_factory.mktemp("runs"), steps=8, groups=2, G=3,
                   completion=lambda step, group, i: str((step + group) % 10) * (i + 1))
    for step in range(1, 9):
        for group in range(2):
            for i in range(3):
                labels.add(run, step=step, group=group, sample=i, rank=i + 1, labeler="ann")
    return run


@pytest.mark.slow  # trains a model for a few epochs
def test_trains_and_the_reward_model_reward_loads_it(rated, tmp_path):
    out = tmp_path / "rm"
    done = subprocess.run([*CLI, str(rated), "--out", str(out), "--epochs", "2", "--eval-fraction", "0.25"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "training all (85,3" in done.stdout and "held-out pairwise accuracy: " in done.stdout
    figures = json.loads((out / "rm_training.json").read_text())
    assert figures["train_pairs"] + figures["heldout_pairs"] == 8 * 2 * 3 and figures["heldout_pairs"] > 0
    # the reward scores the held-out pairs exactly as training measured them: the same text, the same logit
    reward = rewards.build("reward_model", model=str(out), device="cpu")
    df = pairs(rated)
    _, held = split_by_prompt(df.assign(prompt_id=df["run"] + "/" + df["prompt_id"]), 0.25, seed=0)
    chosen = reward(held["prompt"].tolist(), held["chosen"].tolist())
    rejected = reward(held["prompt"].tolist(), held["rejected"].tolist())
    agree = sum(c > r for c, r in zip(chosen, rejected)) / len(held)
    assert agree == pytest.approx(figures["heldout_accuracy"])


@pytest.mark.parametrize("args, message", [
    (["--eval-fraction", "1"], "error: eval_fraction: must be in [0, 1), got 1.0"),
    (["--model", "/no/such/model"], "error: model: '/no/such/model' is not 'tiny' or a Hugging Face model directory"),
    (["--epochs", "0"], "error: epochs: must be at least 1, got 0"),
])
def test_bad_options_are_one_line(rated, tmp_path, args, message):
    done = subprocess.run([*CLI, str(rated), "--out", str(tmp_path / "rm"), *args], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.strip() == message


def test_a_run_without_ratings_says_so(tmp_path):
    run = fake_run(tmp_path, "unrated")
    done = subprocess.run([*CLI, str(run), "--out", str(tmp_path / "rm")], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("error: runs: no preference pairs in the ratings of")
