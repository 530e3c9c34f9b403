"""Fork from step S on the pages (grpo_lab/dashboard/fork_form.py), under AppTest: the step chooser offers the
steps with a whole checkpoint, the form starts from the parent's options, a refused fork says why and starts
nothing; Runs names a run's parent and forks; Compare draws a fork on its parent's curve from its step."""

from __future__ import annotations

import json
import shutil

import pytest

from app_helpers import open_page, texts
from grpo_lab.rundir.layout import RunPaths, write_json_atomic
from grpo_lab.rundir.writer import RunWriter
from shared_runs import copy_run, grpo_run  # noqa: F401  (a fixture)
from trainer_helpers import read_table
from variants_helpers import write_run


@pytest.fixture
def runs(grpo_run, tmp_path, monkeypatch):
    """A runs folder with "parent" (the shared 6-step GRPO run: checkpoints of steps 3 and 6) and "child",
    written as its fork at step 3 (its own scalars: steps 4 to 9, its clock from 0)."""
    folder = tmp_path / "runs"
    copy_run(grpo_run, folder, "parent")
    write_run(folder, "child", "", "", 1, 0.9, steps=0)
    config = json.loads((folder / "child" / "config.json").read_text())
    write_json_atomic(folder / "child" / "config.json", {**config, "fork_from": "parent", "fork_step": 3,
                                                         "max_steps": 9})
    writer = RunWriter(RunPaths(folder / "child"), level="scalars", flush_seconds=0)
    writer.log("scalars", {"step": list(range(4, 10)), "time": [1.7e9 + s for s in range(6)],
                           "wall_s": [1.0 + s for s in range(6)], "reward/mean": [0.9] * 6})
    writer.close()
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(folder))
    return folder


def _button(at, start: str):
    return next(b for b in at.button if b.label.startswith(start))


def test_live_offers_the_forkable_steps_and_a_form_with_the_parents_options(runs):
    at = open_page("live", run="parent")
    assert not at.exception
    assert "Steps with a whole checkpoint, which a fork can start from: 3, 6." in texts(at.caption)
    chooser = at.selectbox(key="live_fork_step_parent")
    assert chooser.options == ["3", "6"] and chooser.value == 6
    chooser.select(3).run()
    _button(at, "🍴 Fork from step 3").click().run()
    assert "A new run from parent's checkpoint of step 3" in texts(at.caption)
    numbers = {n.label: n.value for n in at.number_input}
    parent = json.loads((runs / "parent" / "config.json").read_text())
    assert numbers["Learning rate"] == parent["lr"] and numbers["Steps"] == 6 and numbers["G (responses per prompt)"] == 4
    assert at.text_input(key="launch_fork_live_parent_3_name").value == "parent-fork-3"


def test_a_refused_fork_says_why_and_starts_nothing(runs):
    at = open_page("live", run="parent")
    _button(at, "🍴 Fork from step 6").click().run()
    assert next(n for n in at.number_input if n.label == "Steps").value == 9  # past its last step: 3 more
    next(n for n in at.number_input if n.label == "Steps").set_value(6)
    _button(at, "Start the fork from step 6").click().run()
    assert [e.value for e in at.error] == ["Not started: max_steps: must be greater than the fork step (6): a fork "
                                           "trains the steps after it, got 6"]
    assert sorted(p.name for p in runs.iterdir()) == ["child", "parent"]


def test_a_run_without_checkpoints_says_none_can_be_forked(runs):
    shutil.rmtree(runs / "parent" / "checkpoints" / "initial")  # the reference a fork needs
    at = open_page("live", run="parent")
    assert "No step of this run can be forked yet" in texts(at.caption)
    assert not [b for b in at.button if "Fork from" in b.label]


def test_runs_names_the_family_in_both_languages(runs):
    at = open_page("runs", run="child", runs_pick="child")
    assert "Forked from parent at step 3." in texts(at.caption)
    at = open_page("runs", run="parent", runs_pick="parent", lang="zh")
    assert "分叉：child（第 3 步）。" in texts(at.caption)


def test_compare_draws_the_fork_from_its_step_on_the_parents_curve(runs):
    from grpo_lab.dashboard.views.compare import fork_lines

    child, parent = read_table(runs / "child", "scalars"), read_table(runs / "parent", "scalars")
    line = fork_lines.with_history("child", child.sort_values("step"))
    assert line["step"].tolist() == list(range(1, 10))  # the parent's 1-3 (read from it), then the child's own
    assert line["reward/mean"].tolist() == [*parent["reward/mean"][:3], *[0.9] * 6]
    at_fork = parent.loc[parent["step"] == 3, "wall_s"].item()
    assert line["wall_s"].tolist()[3:] == [at_fork + 1.0 + s for s in range(6)]  # its clock goes on from the parent's
    at = open_page("compare", cmp_runs=["parent", "child"])
    assert not at.exception
