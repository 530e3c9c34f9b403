"""Bad input: one line naming the field, exit code 2, and no half-made run left behind."""

import pytest

from trainer_helpers import SMALL, run_trainer


@pytest.mark.parametrize("args, field", [
    (["--group-size", "1"], "group_size"),
    (["--epsilon", "0"], "epsilon"),
    (["--epsilon", "-0.1"], "epsilon"),
    (["--beta", "-0.5"], "beta"),
    (["--model", "./no/such/model"], "model"),
    (["--model", "nosuchorg/nosuchmodel"], "model"),  # a hub id, offline: a clear error, quickly
    (["--rewards", "no_such_reward=1"], "rewards"),
    (["--std-mode", "median"], "std_mode"),
    (["--max-steps", "ten"], "max_steps"),
])
def test_bad_option_is_refused_before_anything_is_written(tmp_path, args, field):
    result = run_trainer(tmp_path, "bad", *args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}:"), result.stderr
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("name", ["a/b", "..", "../escape", "x..y", ".hidden"])
def test_run_name_with_path_parts_is_refused(tmp_path, name):
    result = run_trainer(tmp_path / "runs", name)
    assert result.returncode == 2
    assert result.stderr.startswith("error: name:")
    assert not any(tmp_path.rglob("*.json"))


def test_existing_run_needs_resume(tmp_path):
    (tmp_path / "taken").mkdir()
    result = run_trainer(tmp_path, "taken")
    assert result.returncode == 2
    assert "error: name:" in result.stderr and "--resume" in result.stderr
    assert list((tmp_path / "taken").iterdir()) == []


def test_resume_of_unknown_run_is_refused(tmp_path):
    result = run_trainer(tmp_path, "ghost", "--resume")
    assert result.returncode == 2 and result.stderr.startswith("error: resume:")


def test_unwritable_runs_dir(tmp_path, monkeypatch):
    # In-process: as root, permissions cannot make a folder unwritable, so the check is faked.
    from grpo_lab.trainer.config import ConfigError, from_dict
    from grpo_lab.trainer.preflight import check_run_dir

    monkeypatch.setattr("grpo_lab.trainer.preflight.os.access", lambda *_: False)
    cfg = from_dict({"runs_dir": str(tmp_path), "name": "r"})
    with pytest.raises(ConfigError, match="^runs_dir: .* is not writable"):
        check_run_dir(cfg)
    assert not (tmp_path / "r").exists()


def test_runs_dir_that_is_a_file(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = run_trainer(blocker, "r", *SMALL)
    assert result.returncode == 2 and result.stderr.startswith("error: runs_dir:"), result.stderr


def test_config_file_with_overrides(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("group_size: 1\n")
    result = run_trainer(tmp_path, "r", "--config", str(cfg))
    assert result.returncode == 2 and result.stderr.startswith("error: group_size:")
    bad = tmp_path / "c.json"
    bad.write_text('{"no_such_option": 3}')
    result = run_trainer(tmp_path, "r", "--config", str(bad))
    assert result.returncode == 2 and result.stderr.startswith("error: no_such_option:")


def test_help_documents_every_option():
    from dataclasses import fields

    from grpo_lab.trainer.config import Config

    result = run_trainer(".", "unused", "--help")
    assert result.returncode == 0
    for f in fields(Config):
        assert "--" + f.name.replace("_", "-") in result.stdout


@pytest.mark.parametrize("args", [["--group-size", "1"], ["--model", "./no/such/model"],
                                  ["--rewards", "no_such_reward=1"], ["--std-mode", "median"],
                                  ["--task", "./no/such/prompts.jsonl"], ["--resume"]])
def test_a_refusal_comes_before_torch_loads(tmp_path, args):
    """Bad options are refused in a tenth of a second, not after the 4-5 s that torch and transformers
    take to import (every refused launch from the form or a sweep would pay them)."""
    import subprocess
    import sys

    probe = ("import sys\nfrom grpo_lab.trainer.__main__ import main\n"
             f"code = main({['--runs-dir', str(tmp_path), '--name', 'bad', *args]!r})\n"
             "print(code, 'torch' in sys.modules, 'transformers' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == ["2", "False", "False"], result.stdout + result.stderr
