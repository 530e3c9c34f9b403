"""Sweeps and the queue, hardened: a sweep checks its bounds before it builds anything; a signed queue entry
starts once and expires; an entry whose folder is a dangling link says why; a sweep's manifest keeps its
variants, and a resume refuses a run whose config.json no longer matches its variant."""

import json
import os
import time
import tracemalloc

import pytest

from grpo_lab.launching import sweep
from grpo_lab.launching import form_checks, launch_queue, launch_records, launcher, pending_launches, process_control
from grpo_lab.launching.keys import MAX_ENTRY_AGE_S, entry_signed, sign_entry
from grpo_lab.rundir import sweep_manifest
from grpo_lab.rundir.layout import SOURCES_KEY, write_json_atomic
from queue_helpers import runs  # noqa: F401 (a fixture: a runs folder, its key outside, no process)


@pytest.fixture(autouse=True)
def slots_taken(monkeypatch):
    """Every slot taken: launches queue (started_by frees them)."""
    monkeypatch.setattr(launch_queue, "training", lambda runs_dir: 99)


# --- bounds before building ----------------------------------------------------------------------


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "1000000000"], "seeds: a sweep may have at most 64 runs, got --seeds 1000000000"),
    (["--seed-list", ",".join(map(str, range(100_000)))], "seed-list: at most 64 seeds (a sweep's limit), got 100000"),
    (["--grid", "beta=" + ",".join(str(i) for i in range(100_000))], "grid: beta: at most 64 values"),
    (["--grid", "beta=1,2,3,4,5,6,7,8", "--grid", "lr=1,2,3,4,5,6,7,8", "--grid", "epsilon=1,2,3,4,5,6,7,8"],
     "grid: 512 grid points x 1 seeds = 512 runs"),
])
def test_a_sweep_past_its_bounds_is_refused_at_once_in_one_line_with_flat_memory(runs, capsys, argv, message):
    tracemalloc.start()
    try:
        assert sweep.main(["--name", "s", "--runs-dir", str(runs), *argv]) == 2
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err[:300]
    assert peak < 50 << 20, f"{peak / 2**20:.0f} MiB traced while refusing"  # a billion seeds: 8.5 GB before
    assert os.listdir(runs / launch_records.LAUNCH_DIR) == []


# --- queue entries: once, and not forever --------------------------------------------------------


def queue(runs, name, **values):
    launcher.launch({"name": name, "max_steps": 3, **values}, runs)
    path = runs / launch_records.LAUNCH_DIR / f"{name}.json"
    entry = json.loads(path.read_text())
    assert entry["queued"] and entry["id"] and entry_signed(runs, entry)
    return path, entry


def started_by(monkeypatch):
    """Let slots free up, and record starts instead of starting a trainer."""
    started = []
    monkeypatch.setattr(launch_queue, "training", lambda runs_dir: 0)
    monkeypatch.setattr(process_control, "start_process", lambda runs_dir, name, argv, processes=1: started.append(name) or 1)
    return started


def refused(runs) -> dict[str, str]:
    return {p.name: p.refused for p in pending_launches.pending(runs) if p.refused}


def test_a_replayed_copy_of_a_started_entry_is_refused_and_says_so(runs, monkeypatch):
    path, entry = queue(runs, "once")
    copy = path.read_text()
    started = started_by(monkeypatch)
    assert launch_queue.start_queued(runs) == ["once"] and started == ["once"]
    path.write_text(copy)  # the run deleted, its signed entry put back
    assert launch_queue.start_queued(runs) == [] and started == ["once"]
    assert refused(runs)["once"].startswith("this queue entry was started once already (a copy put back?)")


def test_an_entry_older_than_its_age_limit_is_refused(runs, monkeypatch):
    path, entry = queue(runs, "old")
    entry["queued_at"] = time.time() - MAX_ENTRY_AGE_S - 60
    write_json_atomic(path, {**entry, "signature": sign_entry(runs, entry)})
    started = started_by(monkeypatch)
    assert launch_queue.start_queued(runs) == [] and started == []
    assert refused(runs)["old"].startswith("this queue entry expired: queued more than 7 days ago")


def test_an_entry_without_an_id_is_refused(runs, monkeypatch):
    path, entry = queue(runs, "plain")
    entry.pop("id")
    write_json_atomic(path, {**entry, "signature": sign_entry(runs, entry)})
    started = started_by(monkeypatch)
    assert launch_queue.start_queued(runs) == [] and started == []
    assert refused(runs)["plain"].startswith("this queue entry has no id")


@pytest.mark.parametrize("target", ["outside", "inside"])
def test_an_entry_whose_folder_is_a_dangling_link_is_refused_with_why(runs, monkeypatch, tmp_path, target):
    queue(runs, "linked")
    (runs / "linked").symlink_to(tmp_path / "gone" if target == "outside" else runs / "gone")
    started = started_by(monkeypatch)
    assert launch_queue.start_queued(runs) == [] and started == []
    why = "run 'linked' points outside the runs folder" if target == "outside" else "name: a run named 'linked' already exists"
    assert refused(runs)["linked"].startswith(why)


def test_the_runs_page_says_why_a_replayed_and_a_linked_entry_were_refused(runs, monkeypatch, tmp_path):
    from app_helpers import open_page

    path, _ = queue(runs, "once")
    copy = path.read_text()
    queue(runs, "linked")
    (runs / "linked").symlink_to(tmp_path / "gone")
    started_by(monkeypatch)
    assert launch_queue.start_queued(runs) == ["once"]
    path.write_text(copy)
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    for name, why in (("once", "refused: this queue entry was started once already"),
                      ("linked", "refused: run 'linked' points outside the runs folder")):
        at = open_page("runs", runs_pick=name)  # the page runs start_queued itself
        shown = [str(c.value) for c in at.code]
        assert any(s.startswith(why) for s in shown), shown
        assert "queued" not in set(at.dataframe[0].value["state"])


# --- a sweep's manifest and --resume -------------------------------------------------------------


def stopped_as_planned(runs, name):
    """The run as its trainer would have left it on a stop: config.json its planned options, no queue entry."""
    entry, problem = sweep_manifest.planned(runs, "s", name)
    assert problem is None
    write_json_atomic(runs / name / "config.json", {**entry["options"], "runs_dir": str(runs), SOURCES_KEY: {}})
    write_json_atomic(runs / name / "status.json", {"state": "stopped", "pid": 0, "step": 1, "total_steps": 3})
    (runs / launch_records.LAUNCH_DIR / f"{name}.json").unlink()


def test_a_sweep_keeps_a_manifest_and_resume_refuses_a_run_edited_since(runs, monkeypatch, capsys):
    argv = ["--name", "s", "--runs-dir", str(runs), "--seeds", "2", "--grid", "beta=0,0.04", "--max-steps", "3"]
    assert sweep.main(argv) == 0
    manifest = json.loads(sweep_manifest.path(runs, "s").read_text())
    assert sorted((r["variant"], r["seed"]) for r in manifest["runs"].values()) == [
        ("beta=0", 0), ("beta=0", 1), ("beta=0.04", 0), ("beta=0.04", 1)]
    assert manifest["runs"]["s-beta_0.04-s1"]["options"]["beta"] == 0.04
    for name in ("s-beta_0-s0", "s-beta_0.04-s0"):
        stopped_as_planned(runs, name)
    config = runs / "s-beta_0-s0" / "config.json"
    edited = {**json.loads(config.read_text()), "beta": 0.1, "lr": 0.5, "max_steps": 30}
    write_json_atomic(config, edited)

    form_checks.check_resume(runs, "s-beta_0.04-s0", json.loads((runs / "s-beta_0.04-s0" / "config.json").read_text()))
    with pytest.raises(form_checks.LaunchError) as err:
        process_control.resume(runs, "s-beta_0-s0")  # the Runs page's Resume
    assert str(err.value) == ("resume refused: config.json of s-beta_0-s0 no longer matches its variant 'beta=0' of "
                              "sweep 's': beta, lr, max_steps differ (.sweeps/s.json)")
    capsys.readouterr()
    resumed = []
    monkeypatch.setattr(process_control, "resume", lambda runs_dir, name: resumed.append(name))
    monkeypatch.setattr(launch_queue, "training", lambda runs_dir: 0)
    assert sweep.main([*argv, "--resume"]) == 0
    assert resumed == ["s-beta_0.04-s0"]  # the edited run is not resumed, nor held
    err = capsys.readouterr().err
    assert "error: resume refused: config.json of s-beta_0-s0 no longer matches its variant 'beta=0'" in err
    assert json.loads(sweep_manifest.path(runs, "s").read_text()) == manifest  # --resume keeps the first manifest
