"""Saving a run's tags and note in a real browser while trainers start and end in the same runs folder:
every Save lands in annotations.json and says so under the form, and that line stays
until the next Save. A run that ends makes the Runs page redraw itself whole; a Save read by the script
was lost to that redraw (views/runs/annotations_view.py saves in a form callback now).

The saves are timed to the trainers' status flips, read from disk as the page reads them: the riskiest
moment is right after the last active run ends, before the page's 2 s refresh has noticed."""

from __future__ import annotations

import functools
import subprocess
import threading

import pytest
from playwright.sync_api import expect

from browser_helpers import assert_page_whole, press, streamlit_server, to_chinese, wait_idle
from grpo_lab.rundir import annotations
from grpo_lab.rundir.status import ACTIVE_STATES, read_status
from trainer_helpers import start_trainer, wait_trainers, wait_until
from variants_helpers import write_run

TARGET = "target"  # the finished run being annotated; the trainers' runs come and go beside it
TINY = ["--prompts-per-step", "4", "--group-size", "4", "--sft-steps", "10", "--max-steps", "3"]  # conftest SMALL, 3 steps
STARTS = {"a": 0.0, "b": 6.0, "c": 10.0}  # seconds after the page is ready: the runs' flips fall apart
WORDS = {"en": ("Tags and note", "Tags of this run", "Note", "Save tags and note"),
         "zh": ("标签与备注", "本运行的标签", "备注", "保存标签与备注")}
SUCCESS = "[data-testid=stAlertContentSuccess]"


def appeared(runs, name: str) -> bool:
    """The run is listed: its trainer has written status.json (it does so after its imports)."""
    return read_status(runs / name / "status.json") is not None


def ended(runs, name: str) -> bool:
    """Finished (or dead: read_status says failed), as the page's any_active sees it."""
    status = read_status(runs / name / "status.json")
    return status is not None and status.get("state") not in ACTIVE_STATES


def stored_as(runs, tags: str, note: str) -> bool:
    """The target's annotations.json holds what was typed (the tags as the form splits them)."""
    saved = annotations.read(runs / TARGET)
    return (saved.tags, saved.note) == (tuple(tags.split()), note)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_save_lands_and_is_confirmed_while_runs_start_and_end(tmp_path, page, traffic, lang):
    runs = tmp_path / "runs"
    runs.mkdir()
    write_run(runs, TARGET, "", "", 0, 0.5, steps=4)
    trainers: dict[str, subprocess.Popen] = {}
    # a, b and c started spaced out (a's run takes seconds, its import longer): while one run ends, the next
    # is importing, and c appears while b is still going
    starts = [threading.Timer(delay, lambda name=name: trainers.setdefault(name, start_trainer(runs, name, *TINY)))
              for name, delay in STARTS.items()]
    heading, tags_label, note_label, save_label = WORDS[lang]
    try:
        with streamlit_server(runs) as url:
            page.goto(f"{url}/?run={TARGET}")
            wait_idle(page)
            if lang == "zh":
                to_chinese(page, "运行列表")
                assert_page_whole(page, chinese=True)  # the English draw is gone before anything is typed
            picker = page.get_by_role("combobox", name={"en": "Run", "zh": "训练运行"}[lang], exact=True)
            expect(picker).to_have_value(TARGET)
            editor = page.locator("[data-testid=stExpander]").filter(has_text=heading)
            editor.locator("summary").click()
            tags_box = editor.get_by_role("textbox", name=tags_label, exact=True)
            note_box = editor.get_by_role("textbox", name=note_label, exact=True)

            # (the trainer whose status flip the save waits for, the flip); a, then b and c overlapping
            plan = [("a", appeared), ("a", ended), ("b", appeared), ("c", appeared), ("b", ended), ("c", ended)]
            for timer in starts:
                timer.start()
            said = None
            for i, (name, flip) in enumerate(plan):
                wait_until(functools.partial(flip, runs, name), 240, f"{name} {flip.__name__}",
                           alive=trainers.get(name))
                tags = f"s{i} {lang}-{name}-{flip.__name__}"
                note = f"save {i}: {name} {flip.__name__}" + ("，运行刚变" if lang == "zh" else ", a run just flipped")
                if said is not None:  # the last save's line stayed under the form through the redraws until now
                    expect(said, f"save {i - 1}'s confirmation, before save {i}").to_be_visible(timeout=5_000)
                expect(tags_box, f"the form, open before save {i}").to_be_visible(timeout=5_000)
                tags_box.fill(tags)
                note_box.fill(note)
                press(traffic, editor.get_by_role("button", name=save_label, exact=True))
                wait_until(functools.partial(stored_as, runs, tags, note), 30,
                           f"save {i} ({name} {flip.__name__}) on disk")
                # the line under the form names this save's tags (and the run): a line left from an
                # earlier save would not do
                said = editor.locator(SUCCESS).filter(has_text=TARGET).filter(has_text=tags)
                expect(said, f"save {i}'s confirmation under the form").to_have_count(1)
                expect(said).to_be_visible()
            wait_trainers(list(trainers.values()), timeout=120)  # each trainer ran to its end
            assert_page_whole(page, chinese=lang == "zh")
    finally:
        for timer in starts:
            timer.cancel()
            if timer.ident is not None:  # started: a start under way ends before the trainers are killed
                timer.join()
        for proc in trainers.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
