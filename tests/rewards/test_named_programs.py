"""A program named by a run's own files (code_tests' python in config.json) is checked on the command line as
the dashboard's form checks it, and the sandbox never runs an interpreter to find out how to sandbox it."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from grpo_lab.finished_runs import rescore
from grpo_lab.rewards import sandbox
from grpo_lab.trainer.config import ConfigError, from_dict, load_config


def planted_run(runs, marker):
    """A run whose config.json names, as code_tests' interpreter, a script of its own that leaves a marker."""
    run = runs / "r"
    run.mkdir(parents=True)
    program = run / "python"
    program.write_text(f"#!/bin/sh\ntouch {marker}\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    cfg = from_dict({"name": "r", "runs_dir": str(runs), "rewards": "correctness,code_tests=0",
                     "reward_params": {"code_tests": {"python": str(program)}}})
    (run / "config.json").write_text(json.dumps(cfg.run_record()))
    return run, program


def test_the_command_lines_refuse_a_program_the_run_names_and_run_nothing(tmp_path, capsys):
    marker = tmp_path / "ran"
    run, _ = planted_run(tmp_path / "runs", marker)
    for spec in ("code_tests", "correctness,code_tests=0"):
        assert rescore.main([str(run), "--rewards", spec]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: reward_params.code_tests.python:") and "inside the runs folder" in err, err
    with pytest.raises(ConfigError, match=r"^reward_params\.code_tests\.python: .* inside the runs folder"):
        load_config(["--resume", "--name", "r", "--runs-dir", str(tmp_path / "runs")])
    assert not marker.exists()


def test_the_sandbox_finds_library_folders_without_running_the_interpreter(tmp_path):
    marker = tmp_path / "ran"
    fake = tmp_path / "bin" / "python3"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\ntouch {marker}\necho /\n")
    fake.chmod(0o755)
    sandbox._bwrap_options("/usr/bin/bwrap", str(fake))
    assert not marker.exists()
    real = os.path.realpath(sys.executable)
    args = sandbox._bwrap_options("/usr/bin/bwrap", real)
    bound = {args[i + 1] for i, a in enumerate(args) if a == "--ro-bind"}
    assert sys.base_prefix in bound or sys.base_prefix.startswith("/usr"), (sys.base_prefix, bound)
