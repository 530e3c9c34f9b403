"""The runs folder's index (rundir/runs_index.py): it lists exactly what list_runs lists, damaged and
planted runs included, and a refresh reads again only the runs whose files changed; the Runs page
rerun reads no run's files when nothing changed. Runs written with the run-directory writer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pandas as pd
import pytest

from app_helpers import open_page, rerun
from grpo_lab.rundir import annotations, json_file, runs_index
from grpo_lab.rundir.layout import write_json_atomic
from grpo_lab.rundir.reader import list_runs
from variants_helpers import write_run


def seen(runs) -> list[tuple]:
    return [(r.name, r.path, r.status, r.config, r.problems) for r in runs]


def age(folder, seconds: float = 60.0) -> None:
    """Every file and folder under `folder` written `seconds` ago (past the index's racy window)."""
    then = time.time() - seconds
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            os.utime(os.path.join(root, name), (then, then), follow_symlinks=False)


@pytest.fixture
def folder(tmp_path):
    """Plain runs and every kind of damaged or planted one list_runs copes with."""
    runs = tmp_path / "runs"
    for i in range(4):
        write_run(runs, f"plain-{i}", "s" if i < 2 else "", "a=1", i, 0.5, steps=3)
    annotations.write(runs / "plain-1", "keep best", "")
    (runs / "empty").mkdir()  # a run still starting: no status, no config
    (runs / "half").mkdir()
    (runs / "half" / "status.json").write_text('{"state": "running", "st')  # written half
    (runs / "deep").mkdir()
    (runs / "deep" / "status.json").write_text("[" * 100_000 + "]" * 100_000)
    (runs / "deep" / "config.json").write_text(json.dumps({"a": [[[[1]]]]}))
    (runs / "newer").mkdir()
    write_json_atomic(runs / "newer" / "status.json", {"state": "finished", "schema_version": 999, "started_at": 5.0})
    (runs / "gone").mkdir()  # an active state whose trainer is gone: failed
    write_json_atomic(runs / "gone" / "status.json", {"state": "running", "pid": 4_000_003, "started_at": 6.0})
    (runs / "fifo").mkdir()
    os.mkfifo(runs / "fifo" / "status.json")
    (runs / "leak").mkdir()
    (tmp_path / "secret.json").write_text('{"state": "finished", "secret": 1}')
    (runs / "leak" / "train.log").symlink_to(tmp_path / "secret.json")
    (runs / "leak" / "config.json").symlink_to(tmp_path / "secret.json")
    (runs / "alias").symlink_to(runs / "plain-0")  # a run folder that is a link inside the runs folder
    (runs / "outside").symlink_to(tmp_path)  # one that leads out: both listed with why they are not read
    (runs / "a-file").write_text("not a run")
    (runs / ".launcher").mkdir()
    (runs / "bad annotations").mkdir()  # not a run name: skipped
    (runs / "tagged-badly").mkdir()
    (runs / "tagged-badly" / annotations.FILE).write_text(json.dumps({"tags": ["no spaces allowed"], "note": ""}))
    return runs


def test_the_index_lists_what_list_runs_lists_damaged_and_planted_runs_too(folder):
    listing = runs_index.RunsIndex(folder).refresh()
    assert seen(listing.runs) == seen(list_runs(folder))
    problems = {r.name: r.problems for r in listing.runs}
    assert any("nested deeper" in p for p in problems["deep"]) and any("not a regular file" in p for p in problems["fifo"])
    assert any("leads outside" in p for p in problems["leak"])
    assert problems["outside"][0].startswith("outside is a symlink") and problems["alias"][0].startswith("alias is a")
    assert {r.name: r.state for r in listing.runs}["gone"] == "failed"
    assert {r.name: r.config for r in listing.runs}["leak"] is None  # refused, so not read through the link
    assert listing.tags == {"plain-1": ("keep", "best")}  # a refused annotations.json has no tags
    assert listing.table.set_index("name").loc["plain-1", "sweep"] == "s"
    assert pd.isna(listing.table.set_index("name").loc["empty", "algo"])


def test_a_refresh_reads_again_only_the_runs_whose_files_changed(folder):
    age(folder)
    index = runs_index.RunsIndex(folder)
    first = index.refresh()
    read = index.reads
    again = index.refresh()
    # the unusual entries (a FIFO, three links) go through read_run's checks each time, the others are not
    # read again: the same listing
    assert again is first and index.reads - read == 4
    read = index.reads

    write_json_atomic(folder / "plain-2" / "status.json", {"state": "stopped", "step": 1, "started_at": 1.0})
    write_run(folder, "later", "", "", 9, 0.5, steps=3)
    annotations.write(folder / "plain-3", "new-tag", "")
    os.rename(folder / "plain-0", folder / "renamed")
    listing = index.refresh()
    assert index.reads - read == 4 + 4  # plain-2, later, plain-3 and renamed; the unusual four again
    assert seen(listing.runs) == seen(list_runs(folder)) and listing.version > first.version
    assert listing.tags["plain-3"] == ("new-tag",) and {r.name: r.state for r in listing.runs}["plain-2"] == "stopped"


def test_a_file_written_in_place_shows_within_a_few_refreshes(folder):
    """A person's editor may write config.json in place (no rename, so its folder's mtime stays): the
    index looks at a quiet run's files every LOOK_EVERY refreshes."""
    age(folder)
    index = runs_index.RunsIndex(folder)
    index.refresh()
    config = folder / "plain-2" / "config.json"
    with open(config, "r+") as fh:  # in place, as `echo >` does
        text = json.loads(fh.read())
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps({**text, "sweep": "edited"}))
    for _ in range(runs_index.LOOK_EVERY):
        listing = index.refresh()
    assert seen(listing.runs) == seen(list_runs(folder))
    assert listing.table.set_index("name").loc["plain-2", "sweep"] == "edited"


def test_a_trainer_that_ends_without_a_word_reads_failed_at_the_next_refresh(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs, "r", "", "", 0, 0.5, steps=3)
    trainer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        write_json_atomic(runs / "r" / "status.json", {"state": "running", "pid": trainer.pid, "started_at": 1.0})
        age(runs)
        index = runs_index.RunsIndex(runs)
        assert [r.state for r in index.refresh().runs] == ["running"] and index.refresh().active
    finally:
        trainer.kill()
        trainer.wait()
    read = index.reads
    listing = index.refresh()  # no file changed: its status is judged again, nothing read
    assert index.reads == read and [r.state for r in listing.runs] == ["failed"] and not listing.active
    assert "ended without reporting" in listing.runs[0].error


def test_a_runs_page_rerun_reads_no_runs_files_when_nothing_changed(tmp_path, monkeypatch):
    """The Runs page at a rerun (its timer, a click) with nothing new: no run's status.json or
    config.json is opened again (it was every run's, every second, before the index)."""
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    for i in range(30):
        write_run(tmp_path, f"r{i:02d}", "s" if i < 6 else "", "a=1", i, 0.5, steps=3)
    age(tmp_path)
    at = open_page("runs")
    opened = []
    real = json_file.read

    def counting(path, *args, **kwargs):
        if os.path.basename(path) in ("status.json", "config.json"):
            opened.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(json_file, "read", counting)
    time.sleep(1.1)  # past the listing's age: the folder is looked at again
    rerun(at)
    assert opened == [] and len(next(d.value for d in at.dataframe if "doctor" in d.value.columns)) == 20
    write_json_atomic(tmp_path / "r03" / "status.json", {"state": "stopped", "step": 1, "total_steps": 3,
                                                         "started_at": 1.7e9 + 3})
    time.sleep(1.1)
    rerun(at)
    assert sorted(set(opened)) == [str(tmp_path / "r03" / "config.json"), str(tmp_path / "r03" / "status.json")]
