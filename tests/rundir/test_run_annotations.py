"""Tags and notes on a run (grpo_lab/rundir/annotations.py): checked like typed input on the way in
and on the way back from disk, written atomically, read only as a regular file inside the run; and
shown on Compare, one line per run (AppTest over runs written with the run-directory writer)."""

from __future__ import annotations

import json
import os

import pytest

from app_helpers import open_page
from grpo_lab.rundir import annotations
from grpo_lab.rundir.annotations import AnnotationError, check_note, check_tags
from variants_helpers import write_run


def test_tags_are_split_deduplicated_and_kept_in_order():
    assert check_tags("baseline, beta=0.04 baseline  高KL") == ["baseline", "beta=0.04", "高KL"]
    assert check_tags(["a", "", "b", "a"]) == ["a", "b"]
    assert check_tags("") == [] and check_tags([]) == []


@pytest.mark.parametrize("bad, why", [
    ("a" * 33, "'" + "a" * 33 + "'"),  # too long
    (["two words"], "'two words'"),  # a space inside one tag (a list is not split)
    ("<b>", "'<b>'"), ("a;b", "'a;b'"), ([3], "'3'"),
    (" ".join(f"t{i}" for i in range(13)), "got 13 tags"),
    ({"a": 1}, "got dict"),
])
def test_a_bad_tag_is_refused_with_one_line_naming_tags_and_what_is_allowed(bad, why):
    with pytest.raises(AnnotationError) as exc:
        check_tags(bad)
    line = str(exc.value)
    assert line.startswith("tags: up to 12 tags, each 1-32 letters, digits or") and why in line
    assert "\n" not in line


def test_a_note_is_text_of_bounded_length_without_control_characters():
    assert check_note("  line one\nline\ttwo  ") == "line one\nline\ttwo" and check_note(None) == ""
    with pytest.raises(AnnotationError, match=r"^note: at most 2000 characters, got 2001$"):
        check_note("x" * 2001)
    with pytest.raises(AnnotationError, match=r"^note: text without control characters"):
        check_note("bell\x07")
    with pytest.raises(AnnotationError, match=r"^note: must be text, got int$"):
        check_note(5)


def test_written_whole_and_read_back(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    assert annotations.read(run) == annotations.Annotations()  # no file: no tags, no problem
    annotations.write(run, "b a", "first try")
    found = annotations.read(run)
    assert found.tags == ("b", "a") and found.note == "first try" and not found.problems
    assert json.loads((run / "annotations.json").read_text())["tags"] == ["b", "a"]
    assert not [p for p in os.listdir(run) if p.startswith(".tmp-")]  # the temporary file was renamed over
    with pytest.raises(AnnotationError):
        annotations.write(run, "ok", "\x00")
    assert annotations.read(run).note == "first try"  # refused before anything was written
    with pytest.raises(AnnotationError, match="no run directory"):
        annotations.write(tmp_path / "missing", "a", "")


@pytest.mark.parametrize("content, problem", [
    (b"{not json", "annotations.json is not valid JSON"),
    (b"[1, 2]", "not a JSON object"),
    (json.dumps({"tags": ["<script>"]}).encode(), "tags: up to 12 tags"),
    (json.dumps({"tags": [], "note": "n" * 70_000}).encode(), "larger than 64 KB"),
])
def test_a_hand_edited_file_reads_as_no_annotations_and_one_problem(tmp_path, content, problem):
    (tmp_path / "annotations.json").write_bytes(content)
    found = annotations.read(tmp_path)
    assert found.tags == () and found.note == "" and len(found.problems) == 1 and problem in found.problems[0]


def test_a_symlink_out_of_the_run_or_a_fifo_is_not_read(tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"tags": ["leaked"], "note": "secret"}))
    run = tmp_path / "run"
    run.mkdir()
    (run / "annotations.json").symlink_to(secret)
    found = annotations.read(run)
    assert found.tags == () and "leads outside" in found.problems[0]
    (run / "annotations.json").unlink()
    os.mkfifo(run / "annotations.json")
    found = annotations.read(run)  # returns at once: a FIFO is opened non-blocking, then refused
    assert found.tags == () and "not a regular file" in found.problems[0]


def test_compare_shows_a_line_per_annotated_run(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    write_run(tmp_path, "plain", "", "", 0, 0.5)
    write_run(tmp_path, "tagged", "", "", 1, 0.7)
    annotations.write(tmp_path / "tagged", "baseline", "lr too high?\nsecond line *not bold*")
    at = open_page("compare", cmp_runs=["tagged", "plain"])
    lines = [c.value for c in at.caption if "baseline" in str(c.value)]
    assert len(lines) == 1
    assert lines[0].startswith("**tagged** · `baseline` · lr too high? second line \\*not bold\\*")
    assert "plain" not in lines[0]  # a run without tags or a note gets no line
    zh = open_page("compare", lang="zh", cmp_runs=["tagged", "plain"])
    assert any("`baseline`" in str(c.value) for c in zh.caption)
