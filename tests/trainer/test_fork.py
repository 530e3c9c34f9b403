"""Forking a run at a step (grpo_lab/trainer/fork.py): a fork with nothing changed is its parent's next steps
bit for bit; a changed option trains; the reference is the parent's initial policy and PPO's value model
the parent's; refused input is one line, exit 2, and nothing written."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from grpo_lab.rundir.status import read_status
from grpo_lab.trainer.__main__ import main
from grpo_lab.trainer.config import from_dict
from grpo_lab.trainer.run import prepare, release
from grpo_lab.rundir.layout import RunLock
from shared_runs import copy_run, grpo_run, ppo_run, two_process_runs  # noqa: F401  (fixtures)
from trainer_helpers import ROOT, read_table, run_trainer, torchrun


def _not_clock(df: pd.DataFrame) -> pd.DataFrame:
    clock = [c for c in df.columns if c in ("time", "wall_s") or c.startswith(("time/", "perf/"))]
    return df.drop(columns=clock).sort_values("step", kind="stable").reset_index(drop=True)


def test_a_fork_with_nothing_changed_repeats_its_parents_next_steps_exactly(grpo_run, tmp_path):
    result = run_trainer(tmp_path, "child", "--fork-from", str(grpo_run), "--fork-step", "3", "--flush-seconds", "0")
    assert result.returncode == 0, result.stderr[-3000:]
    child = tmp_path / "child"
    ours, theirs = _not_clock(read_table(child, "scalars")), _not_clock(read_table(grpo_run, "scalars"))
    assert ours["step"].tolist() == [4, 5, 6]  # its own steps only: the shared history stays the parent's
    theirs = theirs[theirs["step"] > 3].reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, theirs, check_exact=True)
    keys = ["step", "group", "sample_idx"]
    same = ["prompt", "completion", "reward", "advantage"]
    a, b = (read_table(r, "samples").query("step > 3").sort_values(keys).reset_index(drop=True)[same]
            for r in (child, grpo_run))
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    config = json.loads((child / "config.json").read_text())
    assert (config["fork_from"], config["fork_step"]) == (str(grpo_run), 3)
    assert config["sources"]["lr"] == "parent run (grpo)" and config["sources"]["fork_step"] == "command line"
    final = "checkpoints/step-00000006/model.safetensors"
    ours_w, theirs_w = load_file(str(child / final)), load_file(str(grpo_run / final))
    assert all(torch.equal(ours_w[k], theirs_w[k]) for k in theirs_w)


def test_a_fork_with_another_learning_rate_and_beta_trains_with_them_while_the_parent_is_held(grpo_run, tmp_path):
    parent = copy_run(grpo_run, tmp_path, "parent")
    lock = RunLock(parent)
    assert lock.acquire()  # as a trainer that is still training it holds it: a fork only reads the parent
    try:
        result = run_trainer(tmp_path, "hot", "--fork-from", "parent", "--fork-step", "6", "--max-steps", "7",
                             "--lr", "0.01", "--beta", "0.2")
    finally:
        lock.release()
    assert result.returncode == 0, result.stderr[-3000:]
    status = read_status(tmp_path / "hot" / "status.json")
    assert status["state"] == "finished" and status["step"] == 7
    assert read_table(tmp_path / "hot", "scalars")["step"].tolist() == [7]
    optimizer = torch.load(tmp_path / "hot" / "checkpoints" / "step-00000007" / "optimizer.pt", weights_only=True)
    assert {g["lr"] for g in optimizer["param_groups"]} == {0.01}  # not the parent's, which the state restored
    parent = torch.load(grpo_run / "checkpoints" / "step-00000006" / "optimizer.pt", weights_only=True)
    # AdamW's moments went on from the parent's: its count grew by the step's four passes, from 24
    assert all(s["step"] == parent["state"][i]["step"] + 4 for i, s in optimizer["state"].items())
    config = json.loads((tmp_path / "hot" / "config.json").read_text())
    assert (config["lr"], config["beta"], config["max_steps"]) == (0.01, 0.2, 7)


def test_a_ppo_fork_restores_the_parents_value_model_and_keeps_its_initial_policy_as_reference(ppo_run, tmp_path):
    comps, _, _, first_step = prepare(from_dict({"fork_from": str(ppo_run), "fork_step": 4, "max_steps": 5,
                                                 "algo": "ppo", "runs_dir": str(tmp_path), "name": "child",
                                                 "logging": "off"}))
    try:
        assert first_step == 5
        saved = ppo_run / "checkpoints"
        for model, file in ((comps.value_model, "step-00000004/value.safetensors"),
                            (comps.policy, "step-00000004/model.safetensors"),
                            (comps.reference, "initial/model.safetensors")):
            state, weights = model.state_dict(), load_file(str(saved / file))
            assert all(torch.equal(state[k], w) for k, w in weights.items()), file
    finally:
        release(comps)


@pytest.mark.parametrize(("args", "line"), [
    (["--fork-step", "4"], "error: fork_step: run 'grpo' has no checkpoint of step 4 (its forkable steps: 3, 6)"),
    (["--fork-step", "3", "--algo", "ppo"], "error: algo: a fork keeps its parent's algo ('grpo'"),
    (["--fork-step", "3", "--lora-r", "4"], "error: lora_r: a fork keeps its parent's lora_r (0"),
    (["--fork-step", "6"], "error: max_steps: must be greater than the fork step (6)"),
    (["--fork-step", "3", "--lr", "2"], "error: lr: must be in (0, 1], got 2.0"),
])
def test_refused_forks_say_why_in_one_line_and_write_nothing(grpo_run, tmp_path, capsys, args, line):
    before = sorted(p.name for p in (grpo_run / "checkpoints").iterdir())
    assert main(["--runs-dir", str(tmp_path / "runs"), "--fork-from", str(grpo_run), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(line) and "\n" not in err, err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    assert sorted(p.name for p in (grpo_run / "checkpoints").iterdir()) == before


def test_a_fork_of_a_folder_that_is_not_a_run_is_refused(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["--runs-dir", str(tmp_path), "--fork-from", "empty", "--fork-step", "2"]) == 2
    assert capsys.readouterr().err.strip() == f"error: fork_from: {tmp_path / 'empty'} is not a run (no config.json there)"
    assert [p.name for p in tmp_path.iterdir()] == ["empty"]


def test_a_two_process_run_forks_on_two_processes(two_process_runs, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(torchrun("-m", "grpo_lab.trainer", "--runs-dir", str(tmp_path), "--name", "wide",
                                     "--fork-from", str(two_process_runs / "two"), "--fork-step", "2",
                                     "--max-steps", "3"), cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    status = read_status(tmp_path / "wide" / "status.json")
    assert status["state"] == "finished" and status["step"] == 3 and status["world_size"] == 2
    assert read_table(tmp_path / "wide", "scalars")["step"].tolist() == [3]
    assert "forked from two at step 2" in (tmp_path / "wide" / "train.log").read_text()


def test_the_default_name_says_parent_and_step(grpo_run, tmp_path):
    from grpo_lab.trainer.config import load_config

    cfg = load_config(["--runs-dir", str(tmp_path), "--fork-from", str(grpo_run), "--fork-step", "3"])
    assert cfg.name == "grpo-fork-3" and cfg.max_steps == 6 and cfg.checkpoint_every == 3
    (tmp_path / "grpo-fork-3").mkdir()
    assert load_config(["--runs-dir", str(tmp_path), "--fork-from", str(grpo_run), "--fork-step", "3"]).name == \
        "grpo-fork-3-2"
    assert not (tmp_path / "grpo-fork-3-2").exists()
