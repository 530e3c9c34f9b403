"""A resume continues the run as it was configured: only the options that may change mid-run (how long, where
it runs, how often it writes) may be given again with another value; any other is refused in one line that
names the fork as the way to train with it changed, and the stopped run stays as it was."""

from __future__ import annotations

import json

import pytest

from grpo_lab.rundir.status import StatusFile
from grpo_lab.trainer.config import ConfigError, build_parser, from_dict, load_config


@pytest.fixture
def stopped(tmp_path):
    """A stopped run's config.json and status.json, as the trainer writes them (no training needed: a
    resume's options are refused before its checkpoint is read)."""
    cfg = from_dict({"name": "r", "runs_dir": str(tmp_path), "max_steps": 4})
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "config.json").write_text(json.dumps(cfg.run_record()))
    StatusFile(tmp_path / "r" / "status.json", name="r", total_steps=4).update(state="stopped", step=2, pid=0)
    return tmp_path


@pytest.mark.parametrize("flag, value, field", [
    ("--group-size", "6", "group_size"),
    ("--max-new-tokens", "12", "max_new_tokens"),
    ("--model", "HuggingFaceTB/SmolLM2-135M-Instruct", "model"),
    ("--algo", "ppo", "algo"),
    ("--lr", "0.1", "lr"),
])
def test_an_option_that_changes_the_run_is_refused_naming_the_fork(stopped, flag, value, field):
    with pytest.raises(ConfigError) as caught:
        load_config(["--resume", "--name", "r", "--runs-dir", str(stopped), flag, value])
    line = str(caught.value)
    assert line.startswith(f"{field}:") and "--fork-from r --fork-step S" in line and "\n" not in line, line


def test_options_that_may_change_mid_run_are_taken_and_listed_in_help(stopped):
    resume = ["--resume", "--name", "r", "--runs-dir", str(stopped)]
    cfg = load_config([*resume, "--max-steps", "9", "--checkpoint-every", "3"])
    assert (cfg.max_steps, cfg.checkpoint_every) == (9, 3)
    assert load_config([*resume, "--lr", "0.002", "--group-size", "8"]).lr == 0.002  # its own values again
    help_text = " ".join(build_parser().format_help().split())
    assert "may change on a resume: max_steps, " in help_text and "stop_on" in help_text
    from grpo_lab.trainer.config import RESUMABLE

    assert "max_steps" in RESUMABLE and "group_size" not in RESUMABLE


def test_a_refused_resume_leaves_the_run_stopped(stopped, capsys):
    """--algo ppo on a GRPO run ended in a traceback (no value.safetensors) and marked the run failed.
    The command line's own entry point, in this process: the refusal comes before anything loads."""
    from grpo_lab.trainer.__main__ import main

    before = (stopped / "r" / "status.json").read_text()
    assert main(["--runs-dir", str(stopped), "--name", "r", "--resume", "--algo", "ppo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: algo:") and len(err.strip().splitlines()) == 1, err
    assert (stopped / "r" / "status.json").read_text() == before
