"""Fixtures every test file shares (helpers that are plain functions live in trainer_helpers.py)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Callable

import pytest

from app_helpers import open_page
from trainer_helpers import SMALL, run_trainer


# What makes a test slow: it starts the trainer, torchrun, a browser or a package build. A test is
# marked `slow` when its own code, a fixture it uses, or a function of its module that it calls names
# one of these (so new tests are sorted without a list to keep). `make test-fast` leaves them out.
SLOW_CALLS = re.compile(r"\b(run_trainer|start_trainer|tiny_run|trainer_cmd|torch\.distributed\.run|torchrun|"
                        r"sync_playwright|streamlit_server|build_wheel|pip\b.*\bwheel|grpo_lab\.trainer\b\W+-|"
                        r"on_a_small_disk|launcher\.(launch|resume|start_queued)\(|grpo_lab\.sweep\b)")


def _source(obj) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


def _is_slow(item: pytest.Item) -> bool:
    own = _source(getattr(item, "function", None))
    if SLOW_CALLS.search(own):
        return True
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}) or {}
    if any(SLOW_CALLS.search(_source(d.func)) for fixturedefs in defs.values() for d in fixturedefs):
        return True
    module = getattr(item, "module", None)
    helpers = [obj for name, obj in vars(module).items() if inspect.isfunction(obj) and not name.startswith("test_")
               and getattr(obj, "__module__", None) == module.__name__ and re.search(rf"\b{name}\(", own)] if module else []
    return any(SLOW_CALLS.search(_source(f)) for f in helpers)


def pytest_collection_modifyitems(items):
    for item in items:
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)


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
