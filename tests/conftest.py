"""Fixtures every test file shares (helpers that are plain functions live in trainer_helpers.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from app_helpers import open_page
from trainer_helpers import SMALL, run_trainer


def trainer_flags(flags: dict) -> list[str]:
    """{"max_steps": 3, "beta": 0} -> ["--max-steps", "3", "--beta", "0"] (True/False as true/false)."""
    args = []
    for key, value in flags.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        args += [f"--{key.replace('_', '-')}", text]
    return args


@pytest.fixture
def tiny_run(tmp_path) -> Callable[..., Path]:
    """tiny_run(name="run", **flags): a finished run of the built-in demo on a few-second budget
    (trainer_helpers.SMALL, then `flags` as trainer options) in this test's folder; its directory.
    A trainer that fails fails the test with its last stderr lines."""
    def make(name: str = "run", **flags) -> Path:
        result = run_trainer(tmp_path, name, *SMALL, *trainer_flags(flags))
        assert result.returncode == 0, result.stderr[-3000:]
        return tmp_path / name
    return make


@pytest.fixture
def app(runs, monkeypatch) -> Callable:
    """open_page over the `runs` folder the test module makes (its own `runs` fixture)."""
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    return open_page
