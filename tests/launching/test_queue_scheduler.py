"""The queue moves with no page open: `grpo-lab-dashboard` starts a scheduler beside the server
(launching/scheduler.py), one per runs folder, which starts queued launches when a slot frees."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from grpo_lab.launching import form_checks, launch_queue, launch_records, launcher, pending_launches, process_control, scheduler
from grpo_lab.launching.keys import KEY_DIR_ENV
from grpo_lab.rundir.reader import read_run
from trainer_helpers import ROOT, free_port, wait_until

QUICK = {"group_size": 2, "prompts_per_step": 2, "sft_steps": 1, "passes": 1, "max_new_tokens": 2,
         "token_detail_groups": 0, "flush_seconds": 0.2}


def _env(runs, keys) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "GRPO_LAB_RUNS_DIR": str(runs), KEY_DIR_ENV: str(keys),
            launch_queue.MAX_RUNS_ENV: "1"}


def test_a_queued_run_starts_when_the_first_ends_with_no_page_open_after_a_restart(tmp_path, monkeypatch):
    runs, keys = tmp_path / "runs", tmp_path / "keys"
    monkeypatch.setenv(KEY_DIR_ENV, str(keys))
    monkeypatch.setenv(launch_queue.MAX_RUNS_ENV, "1")
    _, first_pid = launcher.launch({**QUICK, "name": "first", "max_steps": 3}, runs)
    _, queued_pid = launcher.launch({**QUICK, "name": "second", "max_steps": 2}, runs)
    assert first_pid > 0 and queued_pid == 0  # one slot: the second waits in the queue
    # a dashboard started after both were queued (as after a restart), and no page ever opened
    server = subprocess.Popen([sys.executable, "-m", "grpo_lab.dashboard.serve", "--server.port", str(free_port())],
                              cwd=tmp_path, env=_env(runs, keys), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        second = wait_until(lambda: (r := read_run(runs, "second")).state == "finished" and r, timeout=240,
                            what="the queued run to start and finish", alive=server, every=0.5)
        first = read_run(runs, "first")
        assert first.state == "finished"
        assert second.started_at >= first.status["updated_at"] - 1.0  # after the first ended, not beside it
    finally:
        server.terminate()
        server.wait(timeout=30)
    # the scheduler ends with its dashboard, and leaves the runs folder's lock free
    handle = wait_until(lambda: scheduler.try_lock(runs), timeout=30, what="the scheduler to end with the server")
    handle.close()


def test_one_scheduler_per_runs_folder_the_second_waits_for_the_lock(tmp_path, monkeypatch):
    runs, keys = tmp_path / "runs", tmp_path / "keys"
    monkeypatch.setenv(KEY_DIR_ENV, str(keys))
    monkeypatch.setenv(launch_queue.MAX_RUNS_ENV, "1")
    launcher.launch({**QUICK, "name": "held", "max_steps": 2000}, runs)  # takes the slot...
    launcher.launch({**QUICK, "name": "next", "max_steps": 2}, runs)  # ...so this one is queued
    other = scheduler.try_lock(runs)  # another dashboard's scheduler holds the lock
    assert other is not None and scheduler.try_lock(runs) is None
    mine = subprocess.Popen([sys.executable, "-m", "grpo_lab.launching.scheduler", "--runs-dir", str(runs),
                             "--parent", str(os.getpid())], cwd=ROOT, env=_env(runs, keys))
    try:
        wait_until(lambda: read_run(runs, "held").state == "running", timeout=120, what="the first run to train")
        process_control.stop(runs, "held")
        wait_until(lambda: read_run(runs, "held").state == "stopped", timeout=120, what="the first run to stop")
        time.sleep(3 * scheduler.POLL_S)  # a slot is free, but this scheduler has no lock: nothing starts
        assert [p.name for p in pending_launches.pending(runs) if p.queued] == ["next"]
        other.close()  # the other dashboard ended
        wait_until(lambda: read_run(runs, "next").state == "finished", timeout=240, every=0.5,
                   what="the waiting scheduler to take over and start the queued run", alive=mine)
    finally:
        mine.send_signal(signal.SIGKILL)
        mine.wait()


# --- two dashboards, two key folders, one runs folder ---------------------------------------------


def queue_as(monkeypatch, keys, runs, name, **values):
    """`name` queued by the dashboard whose key folder is `keys` (every slot taken: it waits)."""
    monkeypatch.setenv(KEY_DIR_ENV, str(keys))
    monkeypatch.setattr(launch_queue, "training", lambda runs_dir: launch_queue.max_runs())
    assert launcher.launch({"name": name, "max_steps": 2, **values}, runs) == (name, 0)


def test_another_dashboards_entry_waits_for_it_never_refused_and_each_key_has_its_scheduler(tmp_path, monkeypatch):
    """Before: B's scheduler refused A's entry as unsigned, for good, and held the one scheduler lock."""
    runs, a, b = tmp_path / "runs", tmp_path / "keys-a", tmp_path / "keys-b"
    queue_as(monkeypatch, a, runs, "mine")
    started = []
    monkeypatch.setattr(process_control, "start_process", lambda runs_dir, name, argv, processes=1: started.append(name) or 1)
    monkeypatch.setattr(launch_queue, "training", lambda runs_dir: 0)  # slots are free

    monkeypatch.setenv(KEY_DIR_ENV, str(b))  # dashboard B, another key folder
    b_lock = scheduler.try_lock(runs)
    assert b_lock is not None and launch_queue.start_queued(runs) == [] and started == []
    entry, = pending_launches.pending(runs)
    assert not entry.refused and entry.elsewhere and not entry.queued  # waits for A: not B's to refuse
    monkeypatch.setenv(KEY_DIR_ENV, str(a))  # dashboard A: its scheduler has its own lock, and starts it
    a_lock = scheduler.try_lock(runs)
    assert a_lock is not None and pending_launches.pending(runs)[0].queued
    assert launch_queue.start_queued(runs) == ["mine"] and started == ["mine"]
    a_lock.close()
    b_lock.close()


def test_queue_here_checks_the_entry_as_the_launch_form_and_signs_it_with_this_key(tmp_path, monkeypatch):
    runs, a, b = tmp_path / "runs", tmp_path / "keys-a", tmp_path / "keys-b"
    queue_as(monkeypatch, a, runs, "mine")
    queue_as(monkeypatch, a, runs, "odd")
    # an entry with what the launch form refuses (planted, or changed by hand: no key's signature fits)
    path = runs / launch_records.LAUNCH_DIR / "odd.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "argv": ["--name", "odd", "--rewards", "pty:spawn=1"], "key": "elsewhere"}))
    before = path.read_bytes()
    monkeypatch.setenv(KEY_DIR_ENV, str(b))
    with pytest.raises(form_checks.LaunchError, match="rewards: 'pty:spawn' imports module 'pty'"):
        launch_queue.queue_here(runs, "odd")  # the form's check (allowed.check_launch), never the entry's word
    assert path.read_bytes() == before  # refused here: left as it was
    launch_queue.queue_here(runs, "mine")
    mine = {p.name: p for p in pending_launches.pending(runs)}["mine"]
    assert mine.queued and not mine.elsewhere  # B's now
    with pytest.raises(form_checks.LaunchError, match="not waiting in another dashboard's queue"):
        launch_queue.queue_here(runs, "mine")
    monkeypatch.setenv(KEY_DIR_ENV, str(a))
    assert {p.name: p for p in pending_launches.pending(runs)}["mine"].elsewhere  # and A leaves it to B
