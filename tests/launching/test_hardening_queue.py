"""A planted launch-queue entry or a planted resume runs nothing: everything read back from the runs
folder goes through the launch form's checks, and queue entries must carry this dashboard's signature."""

import json
import os
import stat

import pytest

from grpo_lab.launching import form_checks, launch_queue, launch_records, pending_launches, process_control
from grpo_lab.launching.keys import key_dir, mark_used, queue_key, run_nonce
from grpo_lab.rundir.layout import write_json_atomic
from grpo_lab.trainer.config import from_dict
from queue_helpers import plant, refused, runs  # noqa: F401 (runs: a fixture; a runs folder, its key outside, no process)

PTY = ["--name", "planted", "--rewards", "pty:spawn=1", "--max-steps", "1"]


def test_an_unsigned_entry_is_never_started_here_and_shown_as_another_dashboards(runs):
    """Unsigned, or signed with another key: planted, or another dashboard's over this folder (another
    GRPO_LAB_KEY_DIR). Never started here, nor refused for the other dashboard (the Runs page says why)."""
    plant(runs, "planted", PTY)
    assert launch_queue.start_queued(runs) == []
    entry = next(p for p in pending_launches.pending(runs) if p.name == "planted")
    assert entry.elsewhere and not entry.queued and not entry.alive and not entry.refused
    assert not (runs / launch_records.LAUNCH_DIR / "planted.log").exists() and not (runs / "planted").exists()
    assert launch_queue.start_queued(runs) == []


def test_a_tampered_entry_is_refused(runs):
    entry = plant(runs, "tampered", ["--name", "tampered", "--max-steps", "1"], sign=True)
    write_json_atomic(runs / launch_records.LAUNCH_DIR / "tampered.json", {**entry, "argv": PTY[:1] + ["tampered"] + PTY[2:]})
    assert launch_queue.start_queued(runs) == []
    assert "no valid signature" in refused(runs)["tampered"]


@pytest.mark.parametrize("argv, reason", [
    (PTY, "rewards: 'pty:spawn' imports module 'pty', which the dashboard does not run"),
    (["--name", "planted", "--task", "/etc/passwd.jsonl"], "task: /etc/passwd.jsonl is outside the folders"),
    (["--name", "planted", "--config", "/tmp/evil.yaml"], "config: not something the launch form queues"),
    (["--name", "planted", "--runs-dir", "/tmp/elsewhere"], "runs_dir: not something the launch form queues"),
    (["--name", "planted", "--group-size", "1"], "group_size: must be >= 2"),
    (["--name", "other"], "name: the entry planted.json starts a run named 'other'"),
    (["--name", "planted", "--no-such-flag", "1"], "unrecognized arguments: --no-such-flag"),
    (["--name", "planted", "--rewards", "no_such_reward"], "rewards: unknown reward 'no_such_reward'"),
])
def test_a_signed_entry_the_form_would_refuse_is_refused_with_its_reason(runs, argv, reason):
    """Signed (the key leaked, or the settings changed since it was queued): checked again anyway."""
    plant(runs, "planted", argv, sign=True)
    assert launch_queue.start_queued(runs) == []
    assert reason in refused(runs)["planted"]
    assert not (runs / "planted").exists()


def test_a_signed_entry_with_a_bad_process_count_is_refused(runs):
    plant(runs, "planted", ["--name", "planted"], sign=True, processes=10_000)
    assert launch_queue.start_queued(runs) == []
    assert refused(runs)["planted"].startswith("processes: must be a whole number in [1, 64]")


def test_a_good_signed_entry_starts_with_the_argv_rebuilt_from_checked_values(runs, monkeypatch):
    started = []
    monkeypatch.setattr(process_control, "start_process", lambda runs_dir, name, argv, processes=1: started.append((name, argv)) or 1)
    plant(runs, "fine", ["--name", "fine", "--max-steps", "3", "--rewards", "correctness=1"], sign=True)
    assert launch_queue.start_queued(runs) == ["fine"]
    assert started == [("fine", ["--name", "fine", "--max-steps", "3", "--rewards", "correctness=1"])]


def test_an_entry_marked_used_but_never_started_is_offered_again_once(runs, monkeypatch):
    """A dashboard killed (-9) after marking an entry used and before its trainer started left it refused
    forever ("started once already"). With no run folder and no process, it is started again, once."""
    started = []
    monkeypatch.setattr(process_control, "start_process", lambda runs_dir, name, argv, processes=1: started.append(name) or 1)
    entry = plant(runs, "lost", ["--name", "lost", "--max-steps", "3"], sign=True)
    mark_used(entry["id"], entry["queued_at"], "marked")  # marked, then killed: the entry still says queued
    assert launch_queue.start_queued(runs) == ["lost"] and started == ["lost"]
    write_json_atomic(runs / launch_records.LAUNCH_DIR / "lost.json", entry)  # killed again at the same place
    assert launch_queue.start_queued(runs) == [] and started == ["lost"]
    assert "started once already" in refused(runs)["lost"]


def test_the_key_lives_outside_the_runs_folder_readable_by_its_owner_only(runs):
    key = key_dir() / "queue.key"
    queue_key()
    assert not key.resolve().is_relative_to(runs.resolve())
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600 and len(queue_key()) == 32
    assert run_nonce(runs, "a") != run_nonce(runs, "b") != run_nonce(runs.parent / "other-runs", "b")


# --- resume -------------------------------------------------------------------------------------


def stopped_run(runs, name, **config):
    record = {**from_dict({"name": name, "runs_dir": str(runs)}).run_record(), **config}
    write_json_atomic(runs / name / "config.json", record)
    write_json_atomic(runs / name / "status.json", {"state": "stopped", "pid": 0, "step": 3, "world_size": 1})


@pytest.mark.parametrize("config, reason", [
    ({"rewards": {"pty:spawn": 1.0}}, "rewards: 'pty:spawn' imports module 'pty'"),
    ({"task": "/etc/passwd.jsonl"}, "task: /etc/passwd.jsonl is outside the folders"),
    ({"model": "/root/elsewhere"}, "model: /root/elsewhere is outside the folders"),
    ({"group_size": 1}, "group_size: must be >= 2"),
    ({"surprise": 1}, "surprise: unknown option"),
])
def test_a_planted_resume_runs_nothing_and_says_why_in_one_line(runs, config, reason):
    stopped_run(runs, "planted", **config)
    with pytest.raises(form_checks.LaunchError) as err:
        process_control.resume(runs, "planted")
    message = str(err.value)
    assert message.startswith("resume refused: config.json of planted: ") and reason in message
    assert "\n" not in message and not (runs / launch_records.LAUNCH_DIR / "planted.log").exists()


def test_a_config_the_trainer_wrote_passes_the_resume_check(runs):
    stopped_run(runs, "mine")
    form_checks.check_resume(runs, "mine", json.loads((runs / "mine" / "config.json").read_text()))


def test_the_runs_page_shows_a_refused_entry_with_its_reason(runs, monkeypatch):
    from app_helpers import open_page

    plant(runs, "planted", PTY, sign=True)
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    at = open_page("runs")  # the page runs start_queued itself, as after a dashboard restart
    assert any(str(c.value).startswith("refused: rewards: 'pty:spawn' imports module 'pty'") for c in at.code)
    assert not (runs / "planted").exists()


def test_the_runs_page_says_why_another_dashboards_entry_waits_and_offers_the_ways_out(runs, monkeypatch):
    """Before: refused for good as "not written by this dashboard", with no way to start it."""
    from app_helpers import open_page

    plant(runs, "planted", PTY)
    plant(runs, "theirs", ["--name", "theirs", "--max-steps", "1"])
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    monkeypatch.setattr(launch_queue, "training", lambda runs_dir: launch_queue.max_runs())  # every slot taken
    at = open_page("runs")
    at.selectbox(key="runs_pick").set_value("planted").run()
    assert any("planted was queued by another dashboard" in w.value and "GRPO_LAB_KEY_DIR" in w.value
               for w in at.warning), [w.value for w in at.warning]
    assert "🔑 queued by another dashboard" in at.dataframe(key="runs_table").value["state"].tolist()
    at.button(key="queue_here").click().run()  # checked as the form's values: refused, left as it was
    assert any("rewards: 'pty:spawn' imports module 'pty'" in e.value for e in at.error)
    assert next(p for p in pending_launches.pending(runs) if p.name == "planted").elsewhere
    at.selectbox(key="runs_pick").set_value("theirs").run()
    at.button(key="queue_here").click().run()
    assert any("Queued theirs here" in s.value for s in at.success)
    theirs = next(p for p in pending_launches.pending(runs) if p.name == "theirs")
    assert theirs.queued and not theirs.elsewhere
