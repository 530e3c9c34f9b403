"""A sweep's counts on Runs and Compare come from one function over every state a run or launch can
be in (views/sweeps_view.count_states): each counted once, so they add up to the runs listed, in
English and Chinese. Runs written with the run-directory writer; no trainer starts."""

from __future__ import annotations

import json
import time

import pytest

from app_helpers import open_page
from grpo_lab.dashboard import i18n
from grpo_lab.launching import launch_queue, launch_records, pending_launches, process_control
from grpo_lab.launching.keys import KEY_DIR_ENV, entry_id, sign_entry
from grpo_lab.dashboard.views.runs import sweeps_view
from grpo_lab.rundir.reader import list_runs
from grpo_lab.rundir.status import STATES
from queue_helpers import DIED, EXPECTED, LAUNCHING, set_state
from variants_helpers import write_run

@pytest.fixture
def runs(tmp_path, monkeypatch):
    """Sweep s with one run or launch in each state (two finished), and a run of no sweep."""
    folder = tmp_path / "runs"
    folder.mkdir()
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(folder))
    monkeypatch.setenv(KEY_DIR_ENV, str(tmp_path / "keys"))
    monkeypatch.setenv(launch_queue.MAX_RUNS_ENV, "1")  # the running runs hold the slot: the queued one waits
    monkeypatch.setattr(process_control, "start_process", lambda *a: pytest.fail("nothing starts here"))
    for seed, state in enumerate(["finished", "finished", "starting", "running", "failed", "stopped"]):
        write_run(folder, f"s-a_1-s{seed}", "s", "a=1", seed, 0.5, steps=4)
        set_state(folder, f"s-a_1-s{seed}", state)
    write_run(folder, "lone", "", "", 0, 0.5, steps=4)
    (folder / launch_records.LAUNCH_DIR).mkdir()
    entry = {"name": "s-b_1-s0", "queued": True, "argv": ["--name", "s-b_1-s0", "--sweep", "s", "--variant", "b=1"],
             "processes": 1, "queued_at": time.time(), "id": entry_id()}
    (folder / launch_records.LAUNCH_DIR / "s-b_1-s0.json").write_text(
        json.dumps({**entry, "signature": sign_entry(folder, entry)}))
    for name, pid in ((LAUNCHING, 4_000_001), (DIED, 4_000_002)):  # started: a command, no argv, no run folder yet
        command = ["python", "-m", "grpo_lab.trainer", "--name", name, "--sweep", "s", "--variant", "b=1",
                   "--runs-dir", str(folder)]
        (folder / launch_records.LAUNCH_DIR / f"{name}.json").write_text(
            json.dumps({"name": name, "pid": pid, "command": command, "processes": 1, "started_at": time.time()}))
    real = process_control.is_trainer_of  # the launching one's trainer is alive; the other died before its run folder
    monkeypatch.setattr(process_control, "is_trainer_of", lambda pid, name, runs_dir=None: name == LAUNCHING or real(pid, name, runs_dir))
    return folder


def test_every_state_is_counted_once_and_the_counts_add_up(runs):
    listed = list_runs(runs)
    pending = pending_launches.pending(runs, {r.name for r in listed})
    counts = sweeps_view.sweep_counts("s", listed, pending, runs)
    assert counts == {"queued": 1, "launching": 1, "starting": 1, "running": 1, "finished": 2, "failed": 1,
                      "stopped": 1, "failed to start": 1}
    assert set(STATES) <= set(counts)  # every state the status module defines has its count
    members = sweeps_view.members(listed, pending, runs)
    assert sum(counts.values()) == len(members) == 9 and "lone" not in set(members["name"])
    table = sweeps_view.progress(listed, pending, runs)
    states = [c for c in table.columns if c not in ("sweep", "variant", "steps")]
    assert table[states].to_numpy().sum() == 9  # the per-variant table adds up to the same runs
    assert dict(zip(table["variant"], table["launching"])) == {"a=1": 0, "b=1": 1}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_runs_and_compare_show_the_same_count_beside_a_table_of_as_many_runs(runs, lang):
    at = open_page("runs", lang=lang)
    assert EXPECTED[lang] in [e.label for e in at.expander]
    table = next(d.value for d in at.dataframe if "doctor" in d.value.columns)
    assert (table["name"] != "lone").sum() == 9  # the line counts the runs the table lists

    at = open_page("compare", lang=lang, cmp_sweep="s")  # the sweep picked: Compare's ?sweep=s
    assert at.query_params["sweep"] == ["s"] or at.query_params["sweep"] == "s"
    assert EXPECTED[lang] in [c.value for c in at.caption]
    assert i18n.texts(lang)["sweeps.count_part"]  # the parts are worded per language, not in code


def queue(folder, name: str, *argv: str) -> None:
    """A queue entry signed with this dashboard's key, as the launch form writes it."""
    entry = {"name": name, "queued": True, "argv": ["--name", name, *argv], "processes": 1, "queued_at": time.time(),
             "id": entry_id()}
    (folder / launch_records.LAUNCH_DIR / f"{name}.json").write_text(json.dumps({**entry, "signature": sign_entry(folder, entry)}))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_queued_runs_show_what_their_entry_plans_and_a_variant_counts_their_steps(runs, lang):
    """A queued run reads its algorithm, model, task and planned steps from its queue entry, through
    the trainer's parser and checks (a planted entry it refuses reads "—"); a variant's total counts
    its queued seeds, so one only queued reads "0 / N", not "0 / ?"."""
    queue(runs, "s-c_1-s0", "--sweep", "s", "--variant", "c=1", "--algo", "ppo", "--max-steps", "7")
    queue(runs, "s-d_1-s0", "--sweep", "s", "--variant", "d=1", "--max-steps", "-5", "--model", "x")  # refused: -5
    at = open_page("runs", lang=lang)
    table = next(d.value for d in at.dataframe if "doctor" in d.value.columns).set_index("name")
    queued = i18n.texts(lang)["runs.step_queued"]
    assert table.loc["s-b_1-s0", ["algo", "model", "task", "step", "latest reward"]].tolist() == [
        "grpo", "tiny", "arithmetic", queued.format(total=200), "—"]
    assert table.loc["s-c_1-s0", ["algo", "step"]].tolist() == ["ppo", queued.format(total=7)]
    assert table.loc["s-d_1-s0", ["algo", "model", "task", "step"]].tolist() == ["—"] * 4
    assert table.loc[LAUNCHING, ["algo", "step"]].tolist() == ["grpo", "0 / 200"]  # started: its command's options

    listed = list_runs(runs)
    steps = sweeps_view.progress(listed, pending_launches.pending(runs, {r.name for r in listed}), runs).set_index("variant")["steps"]
    assert steps.to_dict() == {"a=1": "24 / 24", "b=1": "0 / 600", "c=1": "0 / 7", "d=1": "0 / ?"}
