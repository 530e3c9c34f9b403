"""Phase times that are the device's: on CUDA the timer synchronises at each phase edge (timing.py), so work
queued in one phase is timed in it, not in whichever later phase waits for it; a CPU run synchronises nothing."""

from __future__ import annotations

import pytest
import torch

from grpo_lab.trainer import perf, timing
from grpo_lab.trainer.timing import PhaseTimer


class Clock:
    """time.perf_counter for the timer, moved on only by what the test says the device did."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(timing.time, "perf_counter", c)
    return c


def test_the_device_work_queued_in_a_phase_is_timed_in_it(clock):
    queued = []  # seconds of device work queued and not yet done; a synchronise waits for them

    def sync():
        clock.now += sum(queued)
        queued.clear()

    timer = PhaseTimer(sync=sync)
    queued.append(1.0)  # before the phase: not the phase's
    with timer.phase("old_logp"):
        queued.append(3.0)  # a forward the host queued in 1 ms: its 3 s are the device's
    with timer.phase("reward"):
        clock.now += 0.5  # host work; nothing queued
    assert timer.seconds["old_logp"] == 3.0 and timer.seconds["reward"] == 0.5


def test_the_sync_is_called_at_both_edges_and_at_the_rows_end(clock):
    calls = []
    timer = PhaseTimer(sync=lambda: calls.append("sync"))
    calls.clear()  # the one the start took
    with timer.phase("generation"):
        calls.append("work")
    assert calls == ["sync", "work", "sync"]
    calls.clear()
    timer.scalars()
    assert calls[:1] == ["sync"] and timer.sync is not None  # the next row keeps it


def test_on_cuda_the_gpus_synchronize_is_the_default(clock, monkeypatch):
    devices = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: devices.append(device))
    gpu = perf.GpuPerf(params=1, peak=1e12, device=torch.device("cuda", 0))
    timer = PhaseTimer()
    timer.gpu = gpu  # as components.py sets it on a CUDA device
    with timer.phase("update"):
        pass
    assert devices == [torch.device("cuda", 0)] * 2


def test_a_cpu_run_synchronises_nothing(clock, monkeypatch):
    def refuse(device=None):
        raise AssertionError("synchronised on a CPU run")

    monkeypatch.setattr(torch.cuda, "synchronize", refuse)
    timer = PhaseTimer()
    with timer.phase("generation"):
        clock.now += 2.0
    assert timer.scalars()["time/generation_s"] == 2.0
