"""Exit statuses a script can trust (grpo_lab/trainer/outcome.py): a run the doctor
stops exits 3 and says so in its last line; a run whose rewards never scored ends failed, exit 1,
even with --stop-on none. The real trainer, as a subprocess, a few steps each."""

from __future__ import annotations

import textwrap

import pytest

from grpo_lab.rundir.status import read_status
from grpo_lab.trainer import outcome
from trainer_helpers import SMALL, run_trainer

USER_REWARDS = textwrap.dedent('''
    def judge_down(completions, **kwargs):
        raise RuntimeError("judge server down")

    def no_opinion(completions, **kwargs):
        return [None] * len(completions)
''')


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("exit-codes")
    (path / "exit_rewards.py").write_text(USER_REWARDS)
    return path


def train(folder, name, *args):
    return run_trainer(folder / "runs", name, *SMALL, "--sft-steps", "0", *args, timeout=600, user_modules=folder)


def last_line(result) -> str:
    return result.stderr.strip().splitlines()[-1]


def test_a_run_the_doctor_stops_exits_3_and_says_so_last(folder):
    result = train(folder, "stopped", "--max-steps", "4", "--rewards", "exit_rewards:judge_down=1")
    status = read_status(folder / "runs" / "stopped" / "status.json")
    assert result.returncode == outcome.DOCTOR_STOPPED == 3, result.stderr[-2000:]
    assert status["state"] == "stopped" and status["step"] == 1
    assert "stopped at step 1 by --stop-on critical: doctor (reward_failed, critical)" in last_line(result)
    assert last_line(result).endswith("(exit status 3)")


def test_with_stop_on_none_a_run_that_never_scored_ends_failed(folder):
    result = train(folder, "unscored", "--max-steps", "2", "--stop-on", "none", "--rewards", "exit_rewards:no_opinion=1")
    status = read_status(folder / "runs" / "unscored" / "status.json")
    assert result.returncode == outcome.FAILED == 1, result.stderr[-2000:]
    assert status["state"] == "failed" and status["step"] == 2  # every step ran; none had a score
    assert status["error"].startswith("no reward scored any completion in its 2 steps")
    assert "no reward scored any completion in its 2 steps" in last_line(result)
