"""rundir.layout.run_folders: the one walk of a runs folder that the listing, its index and the launch queue share."""

from __future__ import annotations

import os

from grpo_lab.rundir.layout import run_folders


def test_run_folders_keeps_run_names_that_are_folders_or_links_sorted(tmp_path):
    runs = tmp_path / "runs"
    for name in ("b-run", "a-run", ".launcher", ".trash", "bad name"):
        (runs / name).mkdir(parents=True)
    (runs / "notes.txt").write_text("a file is no run")
    os.symlink(tmp_path / "elsewhere", runs / "c-link")  # dangling: kept, run_path judges where it leads
    os.symlink(runs / "a-run", runs / "d-link")
    found = run_folders(runs)
    assert [e.name for e in found] == ["a-run", "b-run", "c-link", "d-link"]
    assert [e.name for e in found if e.is_symlink()] == ["c-link", "d-link"]


def test_run_folders_of_a_missing_folder_or_a_file_is_empty(tmp_path):
    (tmp_path / "file").write_text("")
    assert run_folders(tmp_path / "missing") == [] and run_folders(tmp_path / "file") == []
