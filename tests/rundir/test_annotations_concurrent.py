"""Tags and a note are saved with the care ratings get (rundir/annotations.py): a temporary file renamed
over, under a lock, read back before the page says so; and a Save on the Runs page is never lost to
the redraw the page does when a run starts or ends (views/runs/annotations_view.py saves in a callback)."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys

import pytest

from app_helpers import open_page
from grpo_lab.dashboard import i18n
from grpo_lab.launching import launch_queue
from grpo_lab.launching.keys import KEY_DIR_ENV
from grpo_lab.rundir import annotations
from variants_helpers import write_run


def _writer(run_dir: str, who: int) -> list[str]:
    said = []
    for i in range(15):
        tags = [f"w{who}", f"n{i}"]
        stored = annotations.write(run_dir, tags, f"writer {who} save {i}")
        said.append("ok" if list(stored.tags) == tags else f"read back {stored.tags}")
    return said


def test_saves_from_many_processes_at_once_each_land_whole(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.starmap(_writer, [(str(run), who) for who in range(4)])
    assert all(r == "ok" for rs in results for r in rs), results  # each save read back what it wrote
    final = json.loads((run / annotations.FILE).read_text())
    who, i = final["tags"][0][1:], final["tags"][1][1:]
    assert final["note"] == f"writer {who} save {i}"  # one save whole, never two halves
    assert sorted(p.name for p in run.iterdir()) == [annotations.LOCK, annotations.FILE]  # no temporary left


def test_a_save_waits_for_the_lock_and_says_so_when_it_cannot(tmp_path, monkeypatch):
    run = tmp_path / "r"
    run.mkdir()
    annotations.write(run, "kept", "first")
    monkeypatch.setattr(annotations, "LOCK_WAIT_S", 0.3)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a'); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(30)",
                               str(run / annotations.LOCK)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(annotations.AnnotationError, match="did not finish within 0 s; nothing was saved"):
            annotations.write(run, "lost", "second")
    finally:
        holder.kill()
        holder.wait()
    assert annotations.read(run).tags == ("kept",)
    assert annotations.write(run, "now", "second").tags == ("now",)  # the lock is free again


@pytest.fixture
def busy(tmp_path, monkeypatch):
    """A runs folder with a finished run 'target' and a run 'busy' whose trainer (a sleeping process) is alive."""
    runs = tmp_path / "runs"
    runs.mkdir()
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    monkeypatch.setenv(KEY_DIR_ENV, str(tmp_path / "keys"))
    write_run(runs, "target", "", "", 0, 0.5, steps=4)
    write_run(runs, "busy", "", "", 1, 0.5, steps=4)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    status = json.loads((runs / "busy" / "status.json").read_text())
    (runs / "busy" / "status.json").write_text(json.dumps({**status, "state": "running", "pid": proc.pid}))
    yield runs, proc
    proc.kill()
    proc.wait()


def _fill_and_save(at, tags: str, note: str) -> None:
    at.text_input(key="annotate_tags_target").set_value(tags)
    at.text_area(key="annotate_note_target").set_value(note)
    next(b for b in at.button if b.label == i18n.texts("en")["annotations.save"]).click()


@pytest.mark.parametrize("event", ["ends", "starts"])
def test_save_while_a_run_ends_or_starts_is_written_and_confirmed(busy, monkeypatch, event):
    runs, proc = busy
    at = open_page("runs", runs_pick="target")
    _fill_and_save(at, "baseline beta=0.04", "kept while runs change")
    if event == "ends":
        proc.kill()  # the busy run ends as Save is pressed: the page redraws itself whole
        proc.wait()
    else:  # a queued run starts as Save is pressed: the same redraw
        started = iter([["next"]])
        monkeypatch.setattr(launch_queue, "start_queued", lambda runs_dir: next(started, []))
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert annotations.read(runs / "target").tags == ("baseline", "beta=0.04")
    assert annotations.read(runs / "target").note == "kept while runs change"
    said = [s.value for s in at.success if "target" in s.value]
    assert said and "baseline beta=0.04" in said[0]
    at.run()  # the page's next refresh: the confirmation is still there
    assert [s.value for s in at.success if "target" in s.value] == said


def test_a_second_save_is_confirmed_again_in_chinese(busy):
    runs, _ = busy
    at = open_page("runs", lang="zh", runs_pick="target")
    for tags in ("a1", "b2"):
        at.text_input(key="annotate_tags_target").set_value(tags)
        next(b for b in at.button if b.label == i18n.texts("zh")["annotations.save"]).click()
        at.run()
        assert annotations.read(runs / "target").tags == (tags,)
        said = [s.value for s in at.success if "target" in s.value]
        assert said and f"标签：{tags}" in said[0], said
    at.text_input(key="annotate_tags_target").set_value("bad,,tag with spaces and a ; semicolon")
    next(b for b in at.button if b.label == i18n.texts("zh")["annotations.save"]).click()
    at.run()
    assert annotations.read(runs / "target").tags == ("b2",)  # refused: what was saved stays
    assert any("tags:" in e.value for e in at.error)

