"""grpo-lab-sweep: the plan (names, labels, seeds), refusals before anything is queued, the queue
it fills, --resume, and one real sweep of two tiny runs to the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_lab.launching import sweep
from grpo_lab.launching import launch_queue, pending_launches, process_control
from grpo_lab.launching.keys import KEY_DIR_ENV, entry_signed
from grpo_lab.rundir.reader import check_name

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _own_key(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_DIR_ENV, str(tmp_path / "keys"))  # queue signatures: this test's key


def test_a_grid_and_seeds_plan_the_cross_product_with_readable_labels():
    runs = sweep.plan("s", {"max_steps": "15"}, sweep.parse_grid(["beta=0,0.04", "epsilon=0.2"]), [0, 1, 2])
    assert len(runs) == 6
    assert {r.variant for r in runs} == {"beta=0,epsilon=0.2", "beta=0.04,epsilon=0.2"}
    first = runs[0]
    assert first.name == "s-beta_0_epsilon_0.2-s0" and check_name(first.name)
    assert first.values == {"max_steps": "15", "beta": "0", "epsilon": "0.2", "seed": 0, "sweep": "s",
                            "variant": "beta=0,epsilon=0.2", "name": first.name}
    assert [r.variant for r in sweep.plan("s", {}, [], [3, 7])] == ["base", "base"]


def test_odd_or_long_labels_still_make_valid_names_and_a_clash_is_refused():
    runs = sweep.plan("s", {}, sweep.parse_grid(["system_prompt=Be brief!, Think: step by step/.."]), [0])
    assert [r.name for r in runs] == ["s-system_prompt_Be_brief_-s0", "s-system_prompt_Think_step_by_step__-s0"]
    assert all(check_name(r.name) for r in runs)
    long_values = ",".join("ab" * 40 + str(i) for i in range(3))  # cut to 100 characters, all three alike
    with pytest.raises(sweep.SweepError, match="same name"):
        sweep.plan("y" * 10, {}, sweep.parse_grid(["system_prompt=" + long_values]), [0])


@pytest.mark.parametrize("argv, message", [
    (["--grid", "foo=1,2"], "grid: foo: unknown option"),
    (["--grid", "beta=0,-1"], "beta=-1: beta: must be in [0, 1000], got -1.0"),
    (["--grid", "seed=1,2"], "grid: seed: set per run"),
    (["--grid", "rewards=correctness"], "grid: rewards: a mapping option"),
    (["--grid", "beta"], "grid: write KEY=V1,V2"),
    (["--seeds", "9", "--grid", "beta=0,1,2,3,4,5,6,7"], "72 runs; a sweep may have at most 64"),
    (["--seed", "3"], "seed: set per run by the sweep; use --seeds"),
    (["--seeds", "2", "--seed-list", "1,2"], "seeds: give --seeds or --seed-list, not both"),
    (["--max-stepz", "3"], "did you mean --max-steps?"),
    (["--group-size", "1"], "group_size: must be >= 2"),
    (["--seeds", "0"], "seeds: must be >= 1"),
    (["--name", "a/b"], "name: must be letters, digits"),
])
def test_a_bad_sweep_is_refused_with_one_line_and_nothing_queued(tmp_path, capsys, argv, message):
    assert sweep.main(["--name", "s", "--runs-dir", str(tmp_path / "runs"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("argv, message", [([], "the following arguments are required: --name"),
                                           (["--name", "s", "--seeds", "two"], "--seeds: invalid int value")])
def test_the_sweeps_own_usage_errors_are_one_line_too(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        sweep.main(argv)
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and message in err and len(err.splitlines()) == 1, err


def test_a_config_file_is_the_base_and_flags_and_the_grid_override_it(tmp_path):
    """An earlier run's config.json works as --config: its own name, seed and sources are dropped."""
    config = tmp_path / "base.json"
    config.write_text(json.dumps({"name": "old", "seed": 9, "sweep": "x", "sources": {}, "beta": 0.1, "max_steps": 7,
                                  "epsilon": 0.3}))
    base = sweep.base_values(["--config", str(config), "--max-steps", "3"])
    assert base == {"beta": 0.1, "max_steps": "3", "epsilon": 0.3}
    (run,) = sweep.plan("s", base, sweep.parse_grid(["beta=0.5"]), [1])
    assert (run.values["beta"], run.values["max_steps"], run.values["seed"]) == ("0.5", "3", 1)


def _occupied(runs: Path) -> None:
    """A run 'training' in this very process: the one slot (GRPO_LAB_MAX_RUNS=1) is taken, so a
    sweep's runs are all queued and no trainer starts."""
    (runs / "busy").mkdir(parents=True)
    (runs / "busy" / "status.json").write_text(json.dumps({"state": "running", "pid": os.getpid(), "step": 1}))


def test_runs_beyond_the_limit_are_queued_signed_and_pass_the_launch_checks(tmp_path, monkeypatch, capsys):
    runs = tmp_path / "runs"
    _occupied(runs)
    monkeypatch.setenv(launch_queue.MAX_RUNS_ENV, "1")
    argv = ["--name", "s", "--runs-dir", str(runs), "--seed-list", "3,7", "--grid", "beta=0,0.04", "--max-steps", "5"]
    assert sweep.main(argv) == 0
    queued = {p.name for p in pending_launches.pending(runs) if p.queued}
    assert queued == {"s-beta_0-s3", "s-beta_0-s7", "s-beta_0.04-s3", "s-beta_0.04-s7"}
    record = json.loads((runs / ".launcher" / "s-beta_0.04-s7.json").read_text())
    assert entry_signed(runs, record)
    argv_out, _ = launch_queue.recheck_entry(runs, "s-beta_0.04-s7", record)  # what start_queued will start
    flags = dict(zip(argv_out[::2], argv_out[1::2]))
    assert flags["--sweep"] == "s" and flags["--variant"] == "beta=0.04" and flags["--seed"] == "7"
    assert flags["--beta"] == "0.04" and flags["--max-steps"] == "5"

    # the same name again: refused, unless --resume, which queues nothing new for runs still queued
    assert sweep.main(argv) == 2
    assert "a sweep named 's' exists" in capsys.readouterr().err
    assert sweep.main([*argv, "--resume"]) == 0
    assert len([p for p in pending_launches.pending(runs) if p.queued]) == 4


def test_a_launch_whose_folder_exists_but_has_no_status_yet_takes_its_slot(tmp_path, monkeypatch):
    """Between creating its folder and writing status.json a trainer is a run of state unknown; with
    no other run active it must still count, or a queued run starts beside it in a 1-slot queue."""
    (tmp_path / "x").mkdir()
    (tmp_path / ".launcher").mkdir()
    (tmp_path / ".launcher" / "x.json").write_text(json.dumps({"name": "x", "pid": os.getpid(), "started_at": 1.0}))
    monkeypatch.setattr(process_control, "is_trainer_of", lambda pid, name, runs_dir=None: name == "x")
    assert launch_queue.training(tmp_path) == 1
    assert [p.name for p in pending_launches.pending(tmp_path, set())] == ["x"]  # an empty listing is a listing
    assert pending_launches.pending(tmp_path) == []  # no listing: the folder says it is a run now


def test_resume_starts_afresh_only_runs_whose_launch_was_refused(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    _occupied(runs)
    monkeypatch.setenv(launch_queue.MAX_RUNS_ENV, "1")
    argv = ["--name", "s", "--runs-dir", str(runs), "--seeds", "2", "--max-steps", "5"]
    assert sweep.main(argv) == 0
    record = json.loads((runs / ".launcher" / "s-base-s1.json").read_text())
    launch_queue.refuse(runs, "s-base-s1", record, "gone wrong")
    assert sweep.run_state(runs, "s-base-s1")[0] == "refused"
    assert sweep.main([*argv, "--resume"]) == 0
    assert sweep.run_state(runs, "s-base-s1")[0] == "queued" and sweep.run_state(runs, "s-base-s0")[0] == "queued"


def test_a_sweep_waits_for_its_runs_and_each_config_says_sweep_variant_and_seed(tmp_path):
    """The real thing, small: 2 variants x 1 seed of 2 steps through the queue (one slot), --wait;
    then --resume restarts the one run made unfinished, and leaves the finished one alone."""
    runs = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(ROOT), launch_queue.MAX_RUNS_ENV: "1", KEY_DIR_ENV: str(tmp_path / "k")}
    argv = [sys.executable, "-m", "grpo_lab.launching.sweep", "--name", "w", "--seeds", "1", "--grid", "beta=0,0.04",
            "--runs-dir", str(runs), "--wait", "--poll", "0.5", "--max-steps", "2", "--prompts-per-step", "4",
            "--group-size", "4", "--sft-steps", "5", "--flush-seconds", "0"]
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    for variant, name in (("beta=0", "w-beta_0-s0"), ("beta=0.04", "w-beta_0.04-s0")):
        config = json.loads((runs / name / "config.json").read_text())
        assert (config["sweep"], config["variant"], config["seed"]) == ("w", variant, 0)
        assert json.loads((runs / name / "status.json").read_text())["state"] == "finished"
    assert "all 2 runs finished" in result.stdout

    status = runs / "w-beta_0-s0" / "status.json"  # as if it had been stopped (its checkpoint is there)
    status.write_text(json.dumps({**json.loads(status.read_text()), "state": "stopped"}))
    result = subprocess.run([*argv, "--resume"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(status.read_text())["state"] == "finished"
    starts = {n: (runs / ".launcher" / f"{n}.log").read_text().count("\n$ ") for n in ("w-beta_0-s0", "w-beta_0.04-s0")}
    assert starts == {"w-beta_0-s0": 2, "w-beta_0.04-s0": 1}
    assert "--resume" in (runs / ".launcher" / "w-beta_0-s0.log").read_text().rsplit("\n$ ", 1)[1].splitlines()[0]


def test_wait_names_the_runs_that_failed(tmp_path):
    """A run that fails (a reward module that cannot be imported) makes --wait exit 1 naming it."""
    runs = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GRPO_LAB_REWARD_MODULES": "no_such_module",
           KEY_DIR_ENV: str(tmp_path / "k")}
    result = subprocess.run(
        [sys.executable, "-m", "grpo_lab.launching.sweep", "--name", "f", "--runs-dir", str(runs), "--wait", "--poll", "0.5",
         "--max-steps", "2", "--rewards", "no_such_module:f"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr[-2000:]
    assert "f-base-s0 (failed)" in result.stderr
