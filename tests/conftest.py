"""Fixtures every test file shares (helpers that are plain functions live in trainer_helpers.py)."""

from __future__ import annotations

import functools
import gc
import inspect
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Callable

import pytest
from _pytest.nodeid import NodeId  # see _in_group

from app_helpers import open_page
from trainer_helpers import SMALL, run_trainer

# One compute thread per process (this one, and the trainers, servers and torchrun ranks it starts,
# which inherit it): the tiny model's matrices gain nothing from a second thread, and a test session
# runs several processes at once on two cores, where each one's second OpenMP thread only spins
# waiting for a core (a 6-step trainer: 8 s of CPU with one thread, 21-30 s with two, measured on a busy
# 2-core machine). Set it in the environment to choose otherwise.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# `datasets` keeps an Arrow copy of every prompt file it loads under ~/.cache/huggingface/datasets, keyed
# by path and time, which no later session reads (one test module's trainers left 24 folders there). The
# session's copies go to a folder of its own (set before anything imports datasets, for the trainers,
# servers and ranks it starts too), removed at the end.
DATASETS_CACHE = tempfile.mkdtemp(prefix="hf-datasets-")
os.environ["HF_DATASETS_CACHE"] = DATASETS_CACHE

# No collections while the test modules import torch, transformers, pandas and streamlit: what they
# load lives the whole session, and is frozen once collected so the tests' collections skip it
# (collecting the suite on one process: 11.5 s of CPU before, 6.6 s after). The trainer does the same.
gc.disable()


def pytest_collection_finish(session):
    gc.freeze()
    gc.enable()


def pytest_unconfigure(config):
    gc.unfreeze()  # so the exit's collection frees them: duckdb's bindings count what was never freed, and say so
    shutil.rmtree(DATASETS_CACHE, ignore_errors=True)


# What makes a test slow: it starts the trainer, torchrun, a browser or a package build. A test is
# marked `slow` when its own code, a fixture it uses, or a function of its module that it calls names
# one of these (so new tests are sorted without a list to keep). `make test-fast` leaves them out.
SLOW_CALLS = re.compile(r"\b(run_trainer|start_trainer|tiny_run|trainer_cmd|train\(from_dict|torch\.distributed\.run|torchrun|"
                        r"sync_playwright|streamlit_server|build_wheel|pip\b.*\bwheel|grpo_lab\.trainer\b\W+-|"
                        r"on_a_small_disk|(launcher\.launch|process_control\.resume|launch_queue\.start_queued)\(|grpo_lab\.sweep\b)")


@functools.lru_cache(maxsize=None)  # a fixture's or helper's source is read once, not once per test using it
def _source(obj) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


def _calls(item: pytest.Item, pattern: re.Pattern) -> bool:
    """Whether the test's own code, a fixture it uses, a function given as its parameter, or a function
    of its module that any of these calls matches."""
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}) or {}
    params = getattr(getattr(item, "callspec", None), "params", {}).values()
    sources = [_source(getattr(item, "function", None)), *(_source(d.func) for fds in defs.values() for d in fds),
               *(_source(p) for p in params if inspect.isfunction(p))]
    if any(pattern.search(text) for text in sources):
        return True
    module = getattr(item, "module", None)
    helpers = [obj for name, obj in vars(module).items() if inspect.isfunction(obj) and not name.startswith("test_")
               and getattr(obj, "__module__", None) == module.__name__
               and any(re.search(rf"\b{name}\(", text) for text in sources)] if module else []
    return any(pattern.search(_source(f)) for f in helpers)


# Which tests share a worker under `pytest -n N --dist loadgroup` (make test); one group a test. Tests
# that start torchrun take turns on one worker: two launches at once would be four ranks on two cores,
# each waiting on the others' collectives. The tests of the browser's session dashboard (two trained
# runs behind a streamlit server: tests/dashboard/browser/conftest.py) share one worker, which builds it once.
# Otherwise a test stays beside its module's other tests when they share a module (or class) fixture,
# so that fixture (a trained run, a server) is built once rather than once per worker.
TORCHRUN = re.compile(r"\b(torchrun|accelerate)\(|processes=2")
SESSION_SERVERS = ("server",)


def _xdist_group(item: pytest.Item) -> str | None:
    if _calls(item, TORCHRUN):
        return "torchrun"
    server = next((name for name in SESSION_SERVERS if name in getattr(item, "fixturenames", ())), None)
    if server:
        return f"session-{server}"
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}) or {}
    if any(d.scope in ("module", "class") for fixturedefs in defs.values() for d in fixturedefs):
        return item.path.stem
    return None


def _heavy_first(items: list[pytest.Item]) -> None:
    """Under xdist, the groups with the most slow tests first, then the other slow tests, then the rest
    (each in collection order): a worker that picks a long group last would finish alone."""
    groups: dict[str, int] = {}
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        key = mark.args[0] if mark else item.nodeid
        groups[key] = groups.get(key, 0) + bool(item.get_closest_marker("slow"))
    def weight(item: pytest.Item) -> int:
        mark = item.get_closest_marker("xdist_group")
        return -groups[mark.args[0] if mark else item.nodeid]
    items.sort(key=weight)  # stable: collection order within a weight


def _in_group(item: pytest.Item, group: str) -> None:
    """Mark the test as one of `group`. The loadgroup scheduler reads a test's group from the end of its
    node id ("...::test_x@group"); xdist 3.8 writes that suffix where pytest 9.2 no longer reads it
    (pytest-dev/pytest-xdist#1386), so that every test would be scheduled alone: this writes it to the id."""
    item.add_marker(pytest.mark.xdist_group(group))
    loadgroup = getattr(item.config.option, "loadgroup", False)  # set in each worker by `--dist loadgroup`
    if loadgroup and hasattr(item, "_id") and not item.nodeid.endswith(f"@{group}"):
        item._id = NodeId.parse(f"{item.nodeid}@{group}")


@pytest.hookimpl(tryfirst=True)  # the slow marks before `-m` reads them
def pytest_collection_modifyitems(items):
    for item in items:
        if _calls(item, SLOW_CALLS):
            item.add_marker(pytest.mark.slow)
        group = _xdist_group(item)
        if group:
            _in_group(item, group)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker collects, and sorts alike
        _heavy_first(items)


def trainer_flags(flags: dict) -> list[str]:
    """{"max_steps": 3, "beta": 0} -> ["--max-steps", "3", "--beta", "0"] (True/False as true/false)."""
    args = []
    for key, value in flags.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        args += [f"--{key.replace('_', '-')}", text]
    return args


@pytest.fixture
def tiny_run(tmp_path) -> Callable[..., Path]:
    """tiny_run(name="run", fresh=False, **flags): a finished run of the built-in demo on a few-second
    budget (trainer_helpers.SMALL, then `flags` as trainer options) in this test's folder; its directory.
    `fresh`: a new `python -m grpo_lab.trainer` instead of a fork (trainer_helpers.run_trainer).
    A trainer that fails fails the test with its last stderr lines."""
    def make(name: str = "run", fresh: bool = False, **flags) -> Path:
        result = run_trainer(tmp_path, name, *SMALL, *trainer_flags(flags), fresh=fresh)
        assert result.returncode == 0, result.stderr[-3000:]
        return tmp_path / name
    return make


@pytest.fixture
def model_and_tokenizer():
    """The built-in tiny model (seed 0, in eval mode) and its tokenizer, new for each test (a few ms):
    a test may leave gradients or hooks on it."""
    from grpo_lab.trainer import tiny  # noqa: PLC0415 - torch loads only for the tests that ask for a model

    tokenizer = tiny.build_tokenizer()
    return tiny.build_model(tokenizer, seed=0).eval(), tokenizer


@pytest.fixture
def app(runs, monkeypatch) -> Callable:
    """open_page over the `runs` folder the test module makes (its own `runs` fixture)."""
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    return open_page
