"""Launching, stopping and resuming the real trainer from the dashboard's launcher."""

import dataclasses
import json
import os
import signal

import pytest

from app_helpers import open_page
from grpo_lab.launching import allowed
from grpo_lab.dashboard import launch_form
from grpo_lab.launching import form_checks, launch_queue, launch_records, launcher, pending_launches, process_control
from grpo_lab.rundir.layout import write_json_atomic
from grpo_lab.rundir.reader import read_run
from grpo_lab.rundir.status import read_status
from trainer_helpers import wait_until

SMALL = {"group_size": 2, "prompts_per_step": 2, "sft_steps": 1, "passes": 1, "max_new_tokens": 2,
         "token_detail_groups": 0, "flush_seconds": 0.2}


@pytest.mark.parametrize("values, message", [
    ({"group_size": 1}, "group_size: must be >= 2"),
    ({"name": "../escape"}, "name: must be"),
    ({"epsilon": -1}, r"epsilon: must be in \(0, 10\]"),
    ({"rewards": "correctness=high"}, "rewards: "),
    ({"rewards": "no_such_reward=1"}, "unknown reward 'no_such_reward'"),
    ({"algo": "dqn"}, "algo: must be one of"),
    ({"max_steps": "ten"}, "max_steps: must be an integer"),
])
def test_bad_form_values_are_refused_before_anything_starts(tmp_path, values, message):
    with pytest.raises(form_checks.LaunchError, match=message):
        launcher.launch({"name": "x", **values}, tmp_path)
    assert not (tmp_path / launch_records.LAUNCH_DIR).exists() and not (tmp_path / "x").exists()


def form_inputs(at) -> dict:
    """The launch form's number inputs by option name (keys: launch_<preset>[_<model kind>]_<option>)."""
    options = launch_form.MAIN + launch_form.MORE
    return {o: w for w in at.number_input if w.key.startswith("launch_") for o in options if w.key.endswith("_" + o)}


def test_the_forms_numbers_carry_the_trainers_bounds(tmp_path, monkeypatch):
    from grpo_lab.trainer.config import Config

    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    inputs = form_inputs(open_page("runs"))
    bounds = {f.name: f.metadata.get("bounds") for f in dataclasses.fields(Config)}
    assert {"lr", "beta", "epsilon", "temperature", "group_size", "prompts_per_step", "max_new_tokens", "max_steps",
            "passes", "sft_steps", "eval_fraction", "eval_every"} <= set(inputs)
    for name, widget in inputs.items():
        b = bounds[name]
        expected = (None, None) if b is None else (b.low, b.high)
        assert (widget.min, widget.max) == expected, name
    assert (inputs["lr"].min, inputs["lr"].max) == (0, 1) and inputs["group_size"].max == 1024  # the numbers, once


def test_an_out_of_range_number_cannot_be_submitted(tmp_path, monkeypatch):
    started = []
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    monkeypatch.setattr(launcher, "launch", lambda values, runs_dir, processes=1: started.append(values) or ("x", 1))
    at = open_page("runs")
    inputs = form_inputs(at)
    defaults = {name: inputs[name].value for name in ("epsilon", "lr", "group_size", "temperature")}
    inputs["epsilon"].set_value(50.0)  # above 10
    inputs["lr"].set_value(5.0)  # above 1
    inputs["group_size"].set_value(100_000)  # above 1024
    inputs["temperature"].set_value(0.001)  # below 0.01
    at.button[[b.label for b in at.button].index("Start training")].click().run()
    assert len(started) == 1 and {k: started[0][k] for k in defaults} == defaults  # what reached the launcher
    assert {k: w.value for k, w in form_inputs(at).items() if k in defaults} == defaults


def test_a_taken_name_is_refused_and_free_name_skips_it(tmp_path):
    (tmp_path / "demo").mkdir()
    with pytest.raises(form_checks.LaunchError, match="already exists"):
        launcher.validate({"name": "demo"}, tmp_path)
    assert launcher.free_name(tmp_path, "demo") == "demo-2"


def test_form_text_travels_as_one_argument_never_through_a_shell(tmp_path):
    argv = launcher.validate({"name": "safe", "model": "tiny; touch /tmp/pwned $(id)"}, tmp_path)
    assert argv[argv.index("--model") + 1] == "tiny; touch /tmp/pwned $(id)"
    assert argv[argv.index("--name") + 1] == "safe"


def test_stop_refuses_a_process_that_is_not_the_runs_trainer(tmp_path):
    write_json_atomic(tmp_path / "fake" / "status.json", {"state": "running", "pid": os.getpid(), "step": 1})
    with pytest.raises(form_checks.LaunchError, match="not the trainer"):
        process_control.stop(tmp_path, "fake")
    with pytest.raises(ValueError):
        process_control.stop(tmp_path, "../fake")


def test_a_launch_that_dies_before_its_run_exists_shows_its_output(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_REWARD_MODULES", "no_such_module")  # allowed here, so the trainer is the one to fail
    name, pid = launcher.launch({**SMALL, "name": "doomed", "rewards": "no_such_module:fn=1"}, tmp_path)
    wait_until(lambda: not process_control.is_trainer_of(pid, name), what="the trainer to exit")
    failed = wait_until(lambda: [p for p in pending_launches.pending(tmp_path) if p.name == name and not p.alive],
                      what="the failed launch")[0]
    assert "error: rewards" in failed.log and not (tmp_path / name).exists(), failed.log
    process_control.dismiss(tmp_path, name)
    assert pending_launches.pending(tmp_path) == []


def test_launch_detached_then_stop_then_resume(tmp_path):
    name, pid = launcher.launch({**SMALL, "name": "lr", "max_steps": 5000}, tmp_path)
    assert os.getsid(pid) == pid  # its own session: a dashboard restart does not take it down
    wait_until(lambda: read_run(tmp_path, name).step >= 2, what="two steps")
    assert read_run(tmp_path, name).state == "running"
    process_control.stop(tmp_path, name)
    stopped = wait_until(lambda: (r := read_run(tmp_path, name)).state == "stopped" and r, what="stopped")
    with pytest.raises(form_checks.LaunchError, match="nothing to stop"):
        process_control.stop(tmp_path, name)
    with pytest.raises(form_checks.LaunchError, match="already exists"):
        launcher.launch({**SMALL, "name": name}, tmp_path)

    wait_until(lambda: not process_control.is_trainer_of(pid, name), what="the stopped trainer to exit")
    new_pid = process_control.resume(tmp_path, name)
    assert new_pid != pid
    resumed = wait_until(lambda: (r := read_run(tmp_path, name)).state == "running" and r.step > stopped.step and r,
                       what="the resumed run to pass its old step")
    with pytest.raises(form_checks.LaunchError, match="only a stopped or failed"):
        process_control.resume(tmp_path, name)
    assert "--resume" in launch_records.launch_log(tmp_path, name) and resumed.step > 0

    os.kill(new_pid, signal.SIGKILL)  # killed outright: no chance to write its own status
    killed = wait_until(lambda: (r := read_run(tmp_path, name)).state == "failed" and r, what="failed")
    assert "ended without reporting" in killed.error
    with pytest.raises(form_checks.LaunchError, match="nothing to stop"):
        process_control.stop(tmp_path, name)


def test_launches_beyond_the_limit_queue_and_start_when_a_slot_frees(tmp_path, monkeypatch):
    monkeypatch.setenv(launch_queue.MAX_RUNS_ENV, "1")
    long = {**SMALL, "max_steps": 5000}
    first, pid = launcher.launch({**long, "name": "first"}, tmp_path)
    second, queued_pid = launcher.launch({**long, "name": "second"}, tmp_path)
    assert pid > 0 and queued_pid == 0  # the second waits: one run at a time
    entries = {p.name: p for p in pending_launches.pending(tmp_path)}
    assert entries["second"].queued and not entries["second"].alive
    with pytest.raises(form_checks.LaunchError, match="already exists"):
        launcher.launch({**long, "name": "second"}, tmp_path)  # a queued name is taken
    assert launch_queue.start_queued(tmp_path) == []  # no free slot yet
    wait_until(lambda: read_status(tmp_path / "first" / "status.json"), what="the first run's status")
    process_control.stop(tmp_path, first)
    wait_until(lambda: not process_control.is_trainer_of(pid, first), what="the first trainer to stop")
    assert launch_queue.start_queued(tmp_path) == ["second"]  # from the files: a restarted dashboard does the same
    started = next(p for p in pending_launches.pending(tmp_path) if p.name == "second")
    assert started.alive and not started.queued
    os.killpg(started.pid, signal.SIGKILL)  # its own session: the trainer and anything it started
    wait_until(lambda: not process_control.is_trainer_of(started.pid, "second"), what="the second trainer to end")


def test_the_form_asks_how_many_processes_and_passes_the_count_on(tmp_path, monkeypatch):
    started = []
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    monkeypatch.setattr(launcher, "launch", lambda values, runs_dir, processes=1: started.append(processes) or ("x", 1))
    at = open_page("runs")
    field = next(w for w in at.number_input if w.key.endswith("_processes"))
    assert (field.value, field.min, field.max) == (1, 1, form_checks.MAX_PROCESSES)
    field.set_value(2)
    at.button[[b.label for b in at.button].index("Start training")].click().run()
    assert started == [2]


def test_several_processes_are_refused_up_front_with_the_trainers_own_line(tmp_path):
    with pytest.raises(form_checks.LaunchError, match=r"prompts_per_step: must be divisible by the number of processes"):
        launcher.launch({**SMALL, "name": "odd", "prompts_per_step": 3}, tmp_path, processes=2)
    with pytest.raises(form_checks.LaunchError, match=r"algo: ppo runs on one process only"):
        launcher.launch({**SMALL, "name": "ppo2", "algo": "ppo"}, tmp_path, processes=2)
    with pytest.raises(form_checks.LaunchError, match=r"processes: must be a whole number in \[1, 64\]"):
        launcher.launch({**SMALL, "name": "many"}, tmp_path, processes=0)
    assert not (tmp_path / launch_records.LAUNCH_DIR).exists()  # nothing started, nothing written


def test_two_processes_start_through_torchrun_show_their_world_and_stop_together(tmp_path, monkeypatch):
    name, pid = launcher.launch({**SMALL, "name": "pair", "max_steps": 5000}, tmp_path, processes=2)
    command = json.loads((tmp_path / launch_records.LAUNCH_DIR / "pair.json").read_text())["command"]
    assert command[1:6] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    try:
        stop_and_check(tmp_path, name, pid, monkeypatch)
    finally:
        if process_control.is_trainer_of(pid, name):
            os.killpg(pid, signal.SIGKILL)  # a failed check leaves no trainer behind


def stop_and_check(tmp_path, name, pid, monkeypatch):
    running = wait_until(lambda: (r := read_run(tmp_path, name)).step >= 2 and r, timeout=180, what="two steps")
    assert running.get("world_size") == 2 and running.get("strategy") == "ddp" and running.get("pid") != pid
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    table = open_page("runs").dataframe[0].value
    assert table.set_index("name").loc["pair", "processes"] == "2 · ddp · cpu"
    assert process_control.stop(tmp_path, name) == pid  # torchrun, which passes SIGTERM to both processes
    stopped = wait_until(lambda: (r := read_run(tmp_path, name)).state == "stopped" and r, timeout=120, what="stopped")
    wait_until(lambda: not process_control.is_trainer_of(pid, name), timeout=60, what="torchrun to exit")
    assert stopped.step >= 2


def test_the_form_starts_a_run_with_tools_or_an_environment_and_checks_their_modules(tmp_path, monkeypatch):
    """Tools, an environment and the tool-call budget are on the form (a tool run needed the command line);
    a module:function tool outside GRPO_LAB_REWARD_MODULES is refused as a reward is."""
    started = []
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    monkeypatch.delenv("GRPO_LAB_REWARD_MODULES", raising=False)
    monkeypatch.setattr(launcher, "launch", lambda values, runs_dir, processes=1: started.append(values) or ("x", 1))
    at = open_page("runs")
    boxes = {w.key: w for w in at.text_input if w.key.startswith("launch_")}
    assert any(k.endswith("_environment") for k in boxes)
    next(w for k, w in boxes.items() if k.endswith("_tools")).set_value("calculator")
    next(w for w in form_inputs(at).values() if w.key.endswith("_max_tool_calls")).set_value(2)
    at.button[[b.label for b in at.button].index("Start training")].click().run()
    assert started and started[0]["tools"] == "calculator" and started[0]["max_tool_calls"] == 2
    refused = allowed.check_launch({"tools": "evil.mod:fn"}, tmp_path)
    assert refused and "GRPO_LAB_REWARD_MODULES" in refused
    refused = allowed.check_launch({"environment": "evil.mod:Env"}, tmp_path)
    assert refused and "GRPO_LAB_REWARD_MODULES" in refused


def test_launch_records_are_the_names_a_run_can_have(tmp_path):
    """A record being written (write_json_atomic's .tmp-*.json) or a planted odd name is no launch."""
    folder = tmp_path / launch_records.LAUNCH_DIR
    folder.mkdir()
    for name in ("b-run", "a-run", ".tmp-x1y2", "..", "no json"):
        (folder / f"{name}.json").write_text("{}")
    (folder / "c-run.log").write_text("")
    assert launch_records.record_names(tmp_path) == ["a-run", "b-run"]
    assert launch_records.record_names(tmp_path / "missing") == []
