"""The warm start is never silent (trainer/sft.py): a progress bar, log lines, and status.json's `phase`,
which Live shows as "warm start: step i/N" (a tool run once sat at "starting · 0/5" for 17 minutes)."""

from __future__ import annotations

import json
import logging
import os

import pytest
import torch

from app_helpers import texts
from grpo_lab.rundir.status import StatusFile, read_status
from grpo_lab.trainer import sft
from grpo_lab.trainer.models import load_policy
from grpo_lab.trainer.tasks import arithmetic
from labels_helpers import fake_run
from shared_runs import one_pass_run  # noqa: F401 (a fixture: pytest finds it by name)


def test_the_warm_start_reports_each_step_logs_and_draws_a_bar(monkeypatch, tmp_path, capsys, caplog):
    monkeypatch.setattr(sft, "REPORT_S", 0.0)  # every step (the trainer's second apart is a rate, not the rule)
    policy, tokenizer, _ = load_policy("tiny", 0, torch.device("cpu"))
    status = StatusFile(tmp_path / "status.json")
    seen = []

    def progress(done: int, total: int) -> None:
        seen.append((done, total))
        status.update(phase={"name": "warm_start", "done": done, "total": total})

    with caplog.at_level(logging.INFO, logger="warm"):
        sft.warm_start(policy, tokenizer, arithmetic().sft_pairs(0, 64, answers_correct=False), 10,
                       torch.device("cpu"), batch_size=4, log=logging.getLogger("warm"), progress=progress)
    assert seen == [(i, 10) for i in range(11)]
    assert read_status(tmp_path / "status.json")["phase"] == {"name": "warm_start", "done": 10, "total": 10}
    assert "warm start: step 5/10" in caplog.text and "final loss" in caplog.text
    err = capsys.readouterr().err
    assert "warm start" in err and "10/10" in err  # the tqdm bar on stderr


def test_a_slow_warm_start_reports_at_most_once_a_second(monkeypatch):
    policy, tokenizer, _ = load_policy("tiny", 0, torch.device("cpu"))
    seen = []
    sft.warm_start(policy, tokenizer, arithmetic().sft_pairs(0, 16, answers_correct=False), 6, torch.device("cpu"),
                   batch_size=2, progress=lambda done, total: seen.append(done), bar=False)
    assert seen[0] == 0 and seen[-1] == 6 and len(seen) < 8  # start and end always; between: by the clock


def test_a_run_clears_its_phase_after_the_warm_start(one_pass_run):
    # the shared finished run: SMALL's 20-step warm start, then RL steps
    status = json.loads((one_pass_run / "status.json").read_text())
    assert "phase" in status and status["phase"] is None  # written during the warm start, then cleared
    assert "warm start: step 2/20" in (one_pass_run / "train.log").read_text()


@pytest.fixture
def runs(tmp_path):
    run = fake_run(tmp_path, "warming", steps=1)
    status = json.loads((run / "status.json").read_text())
    (run / "status.json").write_text(json.dumps({**status, "state": "starting", "step": 0, "total_steps": 5,
                                                 "pid": os.getpid(),
                                                 "phase": {"name": "warm_start", "done": 40, "total": 80}}))
    return tmp_path


def progress_texts(at) -> str:
    return " ".join(p.proto.text for p in at.get("progress"))


@pytest.mark.parametrize(("lang", "shown"), [("en", "warm start: step 40/80"), ("zh", "预热（监督微调）：第 40/80 步")])
def test_live_shows_the_warm_starts_step(app, lang, shown):
    at = app("live", "warming", lang=lang)
    assert shown in progress_texts(at)
    assert [p.proto.value for p in at.get("progress")][0] == 50  # 40 of 80: half the bar


def test_a_dead_trainers_phase_is_not_shown(app, runs):
    status = json.loads((runs / "warming" / "status.json").read_text())
    (runs / "warming" / "status.json").write_text(json.dumps({**status, "pid": 2**22 + 12345}))
    assert read_status(runs / "warming" / "status.json")["phase"] is None
    assert "warm start" not in progress_texts(app("live", "warming"))
    assert texts(app("live", "warming").metric)  # the page still draws (a failed run)


@pytest.mark.parametrize("state, warned", [("starting", False), ("running", False), ("failed", True)])
def test_no_table_yet_is_calm_while_the_run_warms_up_and_a_warning_after(app, runs, state, warned):
    """A run still warming up (or waiting for ratings) has written no scalars: Live says so in its one
    calm line, without the yellow 'table scalars is missing' warning; a run that ended without any
    still gets it."""
    fresh = runs / "fresh"
    fresh.mkdir()
    (fresh / "config.json").write_text(json.dumps({"name": "fresh", "algo": "grpo", "model": "tiny", "max_steps": 5}))
    (fresh / "status.json").write_text(json.dumps({"state": state, "step": 0, "total_steps": 5, "name": "fresh",
                                                   "pid": os.getpid()}))
    at = app("live", "fresh")
    assert "No step has been logged yet" in texts(at.info)
    assert ("table 'scalars'" in texts(at.warning)) == warned, texts(at.warning)
