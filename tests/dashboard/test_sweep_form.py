"""The launch form's Seeds and Sweep over: one submit queues a sweep (grpo_lab/launching/sweep.py), in English
and Chinese; a bad grid is refused with the sweep's one line and nothing is queued. No trainer
starts: the one slot (GRPO_LAB_MAX_RUNS=1) is taken by a run 'training' in this very process."""

from __future__ import annotations

import json
import os

import pytest

from app_helpers import texts
from grpo_lab.dashboard import i18n
from grpo_lab.launching import launch_queue, pending_launches, process_control
from grpo_lab.launching.keys import KEY_DIR_ENV


@pytest.fixture
def runs(tmp_path, monkeypatch):
    folder = tmp_path / "runs"
    (folder / "busy").mkdir(parents=True)
    (folder / "busy" / "status.json").write_text(json.dumps({"state": "running", "pid": os.getpid(), "step": 1}))
    monkeypatch.setenv(launch_queue.MAX_RUNS_ENV, "1")
    monkeypatch.setenv(KEY_DIR_ENV, str(tmp_path / "keys"))
    monkeypatch.setattr(process_control, "start_process", lambda *a: pytest.fail("only queued here: the slot is taken"))
    return folder


def _submit(at, lang: str):
    at.button[[b.label for b in at.button].index(i18n.texts(lang)["launch.submit"])].click().run()
    assert not at.exception, [e.message for e in at.exception]
    return at


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_seeds_and_sweep_over_queue_one_run_per_value_and_seed(app, runs, lang):
    at = app("runs", lang=lang)
    assert i18n.texts(lang)["launch.seeds"] in [n.label for n in at.number_input]
    at.text_input(key="launch_0_name").set_value("fs")
    at.number_input(key="launch_0_seed").set_value(4)
    at.number_input(key="launch_0_seeds").set_value(2)
    at.text_input(key="launch_0_sweep_over").set_value("beta=0,0.04")
    _submit(at, lang)
    queued = {p.name for p in pending_launches.pending(runs) if p.queued}
    assert queued == {"fs-beta_0-s4", "fs-beta_0-s5", "fs-beta_0.04-s4", "fs-beta_0.04-s5"}
    record = json.loads((runs / ".launcher" / "fs-beta_0.04-s5.json").read_text())
    argv = dict(zip(record["argv"][::2], record["argv"][1::2]))
    assert (argv["--sweep"], argv["--variant"], argv["--seed"], argv["--beta"]) == ("fs", "beta=0.04", "5", "0.04")


def test_a_bad_sweep_over_is_refused_before_anything_is_queued(app, runs):
    at = app("runs")
    at.text_input(key="launch_0_sweep_over").set_value("bta=0,1")
    _submit(at, "en")
    assert "grid: bta: unknown option" in texts(at.error)
    assert not (runs / ".launcher").exists()


def test_one_seed_and_no_sweep_is_a_plain_launch(app, runs):
    at = app("runs")
    at.text_input(key="launch_0_name").set_value("single")
    _submit(at, "en")
    assert [p.name for p in pending_launches.pending(runs) if p.queued] == ["single"]
    assert "--sweep" not in json.loads((runs / ".launcher" / "single.json").read_text())["argv"]


def _finished(runs, name: str, sweep: str, variant: str, seed: int) -> None:
    (runs / name).mkdir()
    (runs / name / "config.json").write_text(json.dumps({"name": name, "sweep": sweep, "variant": variant, "seed": seed}))
    (runs / name / "status.json").write_text(json.dumps({"state": "finished", "pid": 0, "step": 3, "total_steps": 3}))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_runs_page_shows_a_sweep_as_one_row_with_its_progress(app, runs, lang):
    from grpo_lab.launching import sweep

    for seed in (0, 1):
        _finished(runs, f"s-beta_0-s{seed}", "s", "beta=0", seed)
    sweep.submit("q", {"max_steps": 3}, [], [0, 1], runs)  # two queued runs of another sweep
    at = app("runs", lang=lang)
    labels = [e.label for e in at.expander]
    words, part = i18n.texts(lang)["sweeps.row"], i18n.texts(lang)["sweeps.count_part"]
    assert words.format(sweep="s", finished=2, total=2, others="") in labels, labels
    queued = part.format(n=2, state=i18n.texts(lang)["state.queued"])
    assert words.format(sweep="q", finished=0, total=2, others=f" · {queued}") in labels, labels


def test_sweep_progress_counts_each_variants_seeds(runs):
    from grpo_lab.launching import sweep
    from grpo_lab.dashboard.views.runs import sweeps_view
    from grpo_lab.rundir.reader import list_runs

    _finished(runs, "s-beta_0-s0", "s", "beta=0", 0)
    _finished(runs, "s-beta_0.04-s0", "s", "beta=0.04", 0)
    (runs / "s-beta_0.04-s0" / "status.json").write_text(json.dumps({"state": "stopped", "pid": 0, "step": 1,
                                                                     "total_steps": 3}))
    sweep.submit("s2", {}, ["beta=0,0.04"], [0], runs)
    listed = list_runs(runs)
    table = sweeps_view.progress(listed, pending_launches.pending(runs, {r.name for r in listed}), runs)
    rows = {(r.sweep, r.variant): (r.queued, r.running, r.finished, r.failed, r.stopped, r.steps)
            for r in table.itertuples()}
    assert rows == {("s", "beta=0"): (0, 0, 1, 0, 0, "3 / 3"), ("s", "beta=0.04"): (0, 0, 0, 0, 1, "1 / 3"),
                    # only queued: the steps their queue entries plan (the default 200), not "0 / ?"
                    ("s2", "beta=0"): (1, 0, 0, 0, 0, "0 / 200"), ("s2", "beta=0.04"): (1, 0, 0, 0, 0, "0 / 200")}


def test_picking_a_task_shows_and_sends_its_own_defaults(app, runs):
    """big_arithmetic has defaults of its own for the built-in model (TASK_DEFAULTS); the form
    shows them once the task is picked, and the queued run gets them, not the demo's."""
    from grpo_lab.trainer.config import TASK_DEFAULTS

    own = TASK_DEFAULTS[("builtin", "big_arithmetic")]
    at = app("runs")
    at.text_input(key="launch_0_task").set_value("big_arithmetic").run()
    assert at.number_input(key="launch_0_builtin_big_arithmetic_lr").value == own["lr"]
    at.text_input(key="launch_0_name").set_value("big")
    _submit(at, "en")
    argv = json.loads((runs / ".launcher" / "big.json").read_text())["argv"]
    flags = dict(zip(argv[::2], argv[1::2]))
    assert flags["--task"] == "big_arithmetic"
    assert (float(flags["--lr"]), int(flags["--sft-steps"]), int(flags["--max-new-tokens"])) == (
        own["lr"], own["sft_steps"], own["max_new_tokens"])
