"""A fork launched from a page (grpo_lab/launching/form_checks.py, launcher.py): checked with its parent's options under the
form's, as the trainer will take them; a page forks only a run of its own runs folder; a fork resumes without
its parent."""

from __future__ import annotations

import json

import pytest

from grpo_lab.launching import form_checks, launcher
from shared_runs import copy_run, grpo_run  # noqa: F401  (a fixture)


@pytest.fixture
def runs(grpo_run, tmp_path):
    copy_run(grpo_run, tmp_path, "parent")  # checkpoints of steps 3 and 6
    return tmp_path


def test_a_fork_is_checked_with_its_parents_options_and_only_the_form_values_are_sent(runs):
    argv = launcher.validate({"fork_from": "parent", "fork_step": 3, "name": "child", "lr": 0.001}, runs)
    assert argv == ["--fork-from", "parent", "--fork-step", "3", "--name", "child", "--lr", "0.001"]
    cfg = form_checks.checked_config({"fork_from": "parent", "fork_step": 3, "name": "child"}, runs)
    parent = json.loads((runs / "parent" / "config.json").read_text())
    assert (cfg.max_steps, cfg.group_size, cfg.checkpoint_every) == (parent["max_steps"], 4, 3)  # the parent's


@pytest.mark.parametrize(("values", "line"), [
    ({"fork_from": "../parent", "fork_step": 3}, "fork_from: must name a run of this runs folder, got '../parent'"),
    ({"fork_from": "nothing", "fork_step": 3}, "fork_from: {runs}/nothing is not a run (no config.json there)"),
    ({"fork_from": "parent", "fork_step": 5}, "fork_step: run 'parent' has no checkpoint of step 5 (its forkable "
                                              "steps: 3, 6)"),
    ({"fork_from": "parent", "fork_step": 3, "algo": "ppo"}, "algo: a fork keeps its parent's algo ('grpo'"),
])
def test_a_page_cannot_fork_what_the_trainer_would_refuse(runs, values, line):
    with pytest.raises(form_checks.LaunchError) as refused:
        launcher.validate({**values, "name": "child"}, runs)
    assert str(refused.value).startswith(line.format(runs=runs))
    assert sorted(p.name for p in runs.iterdir()) == ["parent"]


def test_a_fork_resumes_from_its_own_checkpoints_when_its_parent_is_gone(runs):
    config = {**json.loads((runs / "parent" / "config.json").read_text()), "fork_from": "gone", "fork_step": 3}
    form_checks.check_resume(runs, "parent", config)  # the resume's checks pass: its parent is not needed
