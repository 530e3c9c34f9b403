"""Runs management: the Runs page's filters and pages (pure functions), deleting to the trash and
archiving (real run folders moved on disk, a real process holding a run's lock), and the page
itself under AppTest: tag a run, filter by the tag, archive, delete, restore, empty the trash."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from app_helpers import open_page, rerun, texts
from grpo_lab.launching import housekeeping, launch_records, launcher, pending_launches
from grpo_lab.launching.housekeeping import HousekeepingError
from grpo_lab.dashboard.views.runs import runs_filters, sweeps_view
from grpo_lab.dashboard.views.runs.runs_filters import Filters
from grpo_lab.rundir import annotations
from grpo_lab.rundir.layout import read_json, write_json_atomic
from grpo_lab.rundir.reader import list_runs
from variants_helpers import write_run, write_sweep

# --- filters and pages ------------------------------------------------------------------------


def sixty() -> pd.DataFrame:
    states = ["finished", "failed", "stopped", "running", "starting", "queued", "failed to start", "refused"]
    return pd.DataFrame({
        "name": [f"run-{i:02d}" for i in range(60)],
        "state": [states[i % len(states)] for i in range(60)],
        "algo": ["ppo" if i % 3 == 0 else "grpo" for i in range(60)],
        "sweep": ["s" if i < 10 else "" for i in range(60)],
        "tags": [("keep", "x") if i % 10 == 0 else ("keep",) if i % 5 == 0 else () for i in range(60)],
    })


def test_each_filter_narrows_and_they_combine():
    f = sixty()
    assert runs_filters.apply(f, Filters()).equals(f)
    assert runs_filters.apply(f, Filters(text="RUN-0"))["name"].tolist() == [f"run-0{i}" for i in range(10)]
    assert len(runs_filters.apply(f, Filters(sweeps=("s",)))) == 10
    assert len(runs_filters.apply(f, Filters(tags=("keep",)))) == 12
    assert runs_filters.apply(f, Filters(tags=("keep", "x")))["name"].tolist() == [f"run-{i}0" for i in range(6)]
    assert set(runs_filters.apply(f, Filters(algos=("ppo",)))["algo"]) == {"ppo"}
    both = runs_filters.apply(f, Filters(sweeps=("s",), algos=("grpo",), tags=("keep",)))
    assert both["name"].tolist() == ["run-05"]


def test_states_filter_as_a_person_names_them():
    f = sixty()
    running = runs_filters.apply(f, Filters(states=("running",)))
    assert set(running["state"]) == {"running", "starting"}  # starting counts as running
    failed = runs_filters.apply(f, Filters(states=("failed",)))
    assert set(failed["state"]) == {"failed", "failed to start", "refused"}
    assert set(runs_filters.apply(f, Filters(states=("queued", "stopped")))["state"]) == {"queued", "stopped"}


def test_sixty_runs_are_three_pages_and_a_page_beyond_the_last_is_the_last():
    f = sixty()
    assert runs_filters.pages(len(f)) == 3
    assert runs_filters.page(f, 1)["name"].iloc[0] == "run-00" and len(runs_filters.page(f, 1)) == 20
    assert runs_filters.page(f, 3)["name"].iloc[-1] == "run-59"
    assert runs_filters.page(f, 9).equals(runs_filters.page(f, 3)) and runs_filters.page(f, 0).equals(runs_filters.page(f, 1))
    assert runs_filters.choices(f) == {"sweeps": ["s"], "tags": ["keep", "x"], "algos": ["grpo", "ppo"]}


# --- trash and archive on disk ----------------------------------------------------------------


@pytest.fixture
def runs(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    write_run(folder, "done", "", "", 0, 0.5)
    write_sweep(folder, "s", {"beta=0": 0.2}, seeds=2)
    return folder


def names(folder) -> set[str]:
    return {r.name for r in list_runs(folder)}


def test_delete_moves_the_run_and_its_launch_files_to_the_trash_and_restore_brings_them_back(runs):
    (runs / launch_records.LAUNCH_DIR).mkdir()
    write_json_atomic(runs / launch_records.LAUNCH_DIR / "done.json", {"name": "done", "pid": 0, "started_at": 1.0})
    (runs / launch_records.LAUNCH_DIR / "done.log").write_text("trainer output\n")
    annotations.write(runs / "done", "keep", "a note")
    entry = housekeeping.trash(runs, "done")
    assert entry.startswith("done@") and (runs / ".trash" / entry / "status.json").is_file()
    assert not (runs / "done").exists() and not (runs / launch_records.LAUNCH_DIR / "done.json").exists()
    assert (runs / ".trash" / launch_records.LAUNCH_DIR / f"{entry}.log").read_text() == "trainer output\n"
    # every reader of the runs folder skips the trash: the listing, the launch queue, the sweeps
    assert names(runs) == {"s-beta_0-s0", "s-beta_0-s1"}
    assert pending_launches.pending(runs, names(runs)) == [] and pending_launches.pending(runs) == []
    assert launcher.free_name(runs, "done") == "done"  # the name is free again
    listed = list_runs(runs)
    assert set(sweeps_view.progress(listed, [], runs)["variant"]) == {"beta=0"}
    [shown] = housekeeping.trashed(runs)
    assert (shown.entry, shown.name, shown.info.state) == (entry, "done", "finished") and shown.trashed_at > 1.7e9
    assert housekeeping.held(runs, "trash") == [entry] and housekeeping.held(runs, "archive") == []
    assert housekeeping.restore(runs, entry) == "done"
    assert "done" in names(runs) and annotations.read(runs / "done").tags == ("keep",)
    assert read_json(runs / launch_records.LAUNCH_DIR / "done.json")["name"] == "done" and housekeeping.trashed(runs) == []


def test_the_same_name_deleted_twice_gives_two_entries_and_restore_refuses_a_taken_name(runs):
    first = housekeeping.trash(runs, "done")
    write_run(runs, "done", "", "", 3, 0.9)  # a new run under the freed name
    second = housekeeping.trash(runs, "done")
    assert first != second and len(housekeeping.trashed(runs)) == 2
    housekeeping.restore(runs, second)
    with pytest.raises(HousekeepingError, match=r"^done: a run or launch of that name exists in the runs folder"):
        housekeeping.restore(runs, first)
    for bad in ("../done", "nope", f"{first}/..", "done@x/../../etc"):
        with pytest.raises(HousekeepingError, match="is not an entry of the trash"):
            housekeeping.restore(runs, bad)


def test_empty_trash_removes_entries_for_good_and_not_what_a_link_points_at(runs, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    (runs / "s-beta_0-s0" / "link").symlink_to(outside)  # a run folder holding a link out of it
    housekeeping.trash(runs, "s-beta_0-s0")
    housekeeping.trash(runs, "done")
    assert housekeeping.empty_trash(runs) == 2
    assert housekeeping.trashed(runs) == [] and (outside / "precious.txt").read_text() == "keep me"
    assert names(runs) == {"s-beta_0-s1"}


def test_archive_hides_a_run_and_unarchive_brings_it_back(runs):
    housekeeping.archive(runs, "s-beta_0-s1")
    assert names(runs) == {"done", "s-beta_0-s0"}
    assert [r.name for r in housekeeping.archived(runs)] == ["s-beta_0-s1"]
    assert set(sweeps_view.progress(list_runs(runs), [], runs)["finished"]) == {1}  # one seed left in the sweep
    write_run(runs, "s-beta_0-s1", "", "", 9, 0.1)
    with pytest.raises(HousekeepingError, match=r"^s-beta_0-s1: a run or launch of that name exists"):
        housekeeping.unarchive(runs, "s-beta_0-s1")
    housekeeping.trash(runs, "s-beta_0-s1")
    housekeeping.unarchive(runs, "s-beta_0-s1")
    assert "s-beta_0-s1" in names(runs) and housekeeping.archived(runs) == []
    with pytest.raises(HousekeepingError, match=r"^s-beta_0-s1: no such archived run$"):
        housekeeping.unarchive(runs, "s-beta_0-s1")


HOLD_LOCK = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from grpo_lab.rundir.layout import RunLock, write_json_atomic
    run = Path(sys.argv[1])
    assert RunLock(run).acquire()
    status = {"state": "running", "pid": __import__("os").getpid(), "step": 1, "total_steps": 12}
    write_json_atomic(run / "status.json", status)
    print("locked", flush=True)
    time.sleep(60)
""")


def test_a_running_or_queued_run_is_refused_with_one_line(runs):
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(runs / "done")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        for move in (housekeeping.trash, housekeeping.archive):
            with pytest.raises(HousekeepingError) as exc:
                move(runs, "done")
            assert str(exc.value).startswith("done is running: stop it first") and "\n" not in str(exc.value)
        # a status file that says finished does not help while the trainer still holds the lock
        write_json_atomic(runs / "done" / "status.json", {"state": "finished", "step": 12, "total_steps": 12})
        with pytest.raises(HousekeepingError, match=r"^done is running \(its trainer holds the run's lock\)"):
            housekeeping.trash(runs, "done")
        assert (runs / "done").is_dir() and not housekeeping.held(runs, "trash")
    finally:
        holder.kill()
        holder.wait()
    housekeeping.trash(runs, "done")  # the lock died with its process
    (runs / launch_records.LAUNCH_DIR).mkdir()
    write_json_atomic(runs / launch_records.LAUNCH_DIR / "later.json", {"name": "later", "queued": True, "argv": []})
    (runs / "later").mkdir()
    with pytest.raises(HousekeepingError, match=r"^later is queued: it cannot be deleted; dismiss it from the queue"):
        housekeeping.trash(runs, "later")
    with pytest.raises(ValueError, match="run name"):
        housekeeping.trash(runs, "../etc")


def test_a_trash_folder_that_is_a_symlink_is_refused(runs, tmp_path):
    (runs / ".trash").symlink_to(tmp_path)
    with pytest.raises(HousekeepingError, match=r"\.trash is not a folder \(a symlink\?\)"):
        housekeeping.trash(runs, "done")
    assert (runs / "done").is_dir() and housekeeping.trashed(runs) == [] and housekeeping.empty_trash(runs) == 0


def test_a_lock_file_that_is_a_symlink_is_never_truncated(runs, tmp_path):
    """A run folder from elsewhere whose .lock points at a file of the user's: Delete and Archive
    refuse it with one line, and the file keeps its bytes."""
    precious = tmp_path / "bashrc"
    precious.write_text("export KEEP=1\n")
    (runs / "done" / ".lock").symlink_to(precious)
    for move in (housekeeping.trash, housekeeping.archive):
        with pytest.raises(HousekeepingError, match=r"^done: cannot take its lock"):
            move(runs, "done")
    assert precious.read_text() == "export KEEP=1\n" and (runs / "done").is_dir()


def test_a_run_that_is_a_symlink_is_refused_not_lost_in_the_trash(runs):
    (runs / "alias").symlink_to(runs / "done")
    with pytest.raises(HousekeepingError, match=r"^alias is a symlink"):
        housekeeping.trash(runs, "alias")
    assert (runs / "alias").is_symlink() and housekeeping.held(runs, "trash") == []


# --- the page (AppTest) -----------------------------------------------------------------------


def test_the_page_tags_filters_pages_archives_deletes_and_restores(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    for i in range(25):
        write_run(tmp_path, f"r{i:02d}", "", "", i, 0.5)
    at = open_page("runs", runs_pick="r07")
    assert len(at.dataframe[0].value) == 20 and at.number_input(key="runs_page").max == 2
    assert any("Runs 1–20 of the 25 that match (25 in all)" in str(c.value) for c in at.caption)
    at.text_input(key="annotate_tags_r07").set_value("keep this")
    at.text_area(key="annotate_note_r07").set_value("the good one")
    at.button[[b.label for b in at.button].index("Save tags and note")].click()
    rerun(at)
    assert "Saved the tags and note of r07 at" in texts(at.success)
    assert annotations.read(tmp_path / "r07").tags == ("keep", "this")
    rerun(at)
    at.multiselect(key="runs_tags").select("keep")
    rerun(at)
    assert at.dataframe[0].value["name"].tolist() == ["r07"] and at.dataframe[0].value["tags"].tolist() == ["keep this"]
    at.text_input(key="annotate_tags_r07").set_value("bad tag!")
    at.button[[b.label for b in at.button].index("Save tags and note")].click()
    rerun(at)
    assert "tags: up to 12 tags" in texts(at.error) and annotations.read(tmp_path / "r07").tags == ("keep", "this")
    at.button(key="run_archive").click()
    rerun(at)
    assert not (tmp_path / "r07").exists() and [r.name for r in housekeeping.archived(tmp_path)] == ["r07"]
    at.segmented_control(key="runs_view").set_value("archive")
    rerun(at)
    assert at.dataframe[0].value["name"].tolist() == ["r07"]
    at.button(key="run_unarchive").click()
    rerun(at)
    assert (tmp_path / "r07").is_dir() and "r07 is back in the list of runs." in texts(at.success)
    at.segmented_control(key="runs_view").set_value("list")
    at.session_state["runs_pick"] = "r03"
    rerun(at)
    at.button(key="run_trash").click()
    rerun(at)
    assert not (tmp_path / "r03").exists() and "Moved r03 to the trash." in texts(at.success)
    at.segmented_control(key="runs_view").set_value("trash")
    rerun(at)
    assert at.dataframe[0].value["name"].tolist() == ["r03"]
    assert at.button(key="empty_trash").disabled  # not before the confirmation is ticked
    at.button(key="run_restore").click()
    rerun(at)
    assert (tmp_path / "r03").is_dir()
    housekeeping.trash(tmp_path, "r04")
    rerun(at)
    at.checkbox(key="trash_confirm").check()
    rerun(at)
    at.button(key="empty_trash").click()
    rerun(at)
    assert "Removed 1 runs for good." in texts(at.success) and housekeeping.trashed(tmp_path) == []
    assert not (tmp_path / "r04").exists() and len(list_runs(tmp_path)) == 24


def test_the_page_refuses_to_delete_a_running_run_in_chinese_too(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    write_run(tmp_path, "busy", "", "", 0, 0.5)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(tmp_path / "busy")], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        at = open_page("runs", lang="zh", runs_pick="busy")
        assert not [b for b in at.button if b.key in ("run_trash", "run_archive")]  # not offered while it trains
        assert [m.label for m in at.multiselect][:2] == ["状态", "算法"]
        views = at.segmented_control(key="runs_view").options  # (a leading emoji is drawn as the option's icon)
        assert views[0] == "运行" and "归档（0）" in views[1] and "回收站（0）" in views[2]
    finally:
        holder.kill()
        holder.wait()


def test_a_sweeps_row_lists_only_its_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    write_sweep(tmp_path, "s", {"beta=0": 0.2, "beta=0.04": 0.8}, seeds=2)
    write_run(tmp_path, "lone", "", "", 0, 0.5)
    at = open_page("runs")

    def table():
        return next(d.value for d in at.dataframe if "doctor" in d.value.columns)

    assert len(table()) == 5
    at.button(key="sweep_list_s").click()
    rerun(at)
    assert at.multiselect(key="runs_sweeps").value == ["s"]
    assert sorted(table()["name"]) == ["s-beta_0-s0", "s-beta_0-s1", "s-beta_0.04-s0", "s-beta_0.04-s1"]
