"""A pytest plugin for bench/bench_suite_cpu.py: each test's node id goes into the environment while it
runs ($SUITE_CPU_TEST), so every process it starts (a trainer, torchrun, a server, Chromium) carries it
and the bench's sampler can charge that process's CPU to the test. A process that a session fixture
starts is charged to the test that first asked for the fixture. A trainer forked by the tests' server
(tests/trainer_fork.py) carries the environment the server started with, so the server and all its forks
go to the test that first ran a trainer on that worker.

On two busy cores a test's wall time says little (it waits on everyone's work); its CPU, and that of
what it started, is what the suite's time is made of.
"""

from __future__ import annotations

import os

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    os.environ["SUITE_CPU_TEST"] = item.nodeid
    yield
    os.environ.pop("SUITE_CPU_TEST", None)
