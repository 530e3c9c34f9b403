"""perf/mfu and perf/gpu_memory_gb: the arithmetic, and the timer handing each step's counts to it."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grpo_lab.rundir import metrics
from grpo_lab.trainer import perf
from grpo_lab.trainer.timing import PhaseTimer


def test_peak_from_the_setting_wins_over_the_table(monkeypatch):
    assert perf.peak_flops("NVIDIA H100 PCIe") == 756e12 and perf.peak_flops("NVIDIA H100 80GB HBM3") == 989e12
    monkeypatch.setenv(perf.PEAK_ENV, "100")
    assert perf.peak_flops("NVIDIA H200") == 100e12


def test_mfu_is_model_flops_over_seconds_over_peak(monkeypatch):
    reset = []
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 3e9)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: reset.append(device))
    gpu = perf.GpuPerf(params=1_000_000, peak=1e12, device=torch.device("cuda", 0))
    out = gpu.scalars(sampled_tokens=100, trained_tokens=400, seconds=2.0)
    assert out["perf/mfu"] == pytest.approx((2e6 * 100 + 6e6 * 400) / 2.0 / 1e12)
    assert out["perf/gpu_memory_gb"] == 3.0 and reset == [torch.device("cuda", 0)]
    assert math.isnan(perf.GpuPerf(1, math.nan, torch.device("cuda")).scalars(1, 1, 1.0)["perf/mfu"])


def test_the_timer_passes_each_steps_tokens_and_wall_time_then_starts_over():
    seen = []

    class Recorder:
        def scalars(self, sampled, trained, seconds):
            seen.append((sampled, trained, seconds))
            return {"perf/mfu": 0.5, "perf/gpu_memory_gb": 1.0}

    timer = PhaseTimer(gpu=Recorder())
    timer.count("generation", 10)
    timer.count("update", 40)
    first = timer.scalars()
    timer.count("generation", 3)
    timer.scalars()
    assert first["perf/mfu"] == 0.5 and [s[:2] for s in seen] == [(10, 40), (3, 0)] and seen[0][2] > 0
    assert "perf/mfu" not in PhaseTimer().scalars()  # a CPU run writes no GPU columns


def test_the_registry_holds_the_gpu_columns_only_for_cuda_runs():
    assert {"perf/mfu", "perf/gpu_memory_gb"} <= metrics.names("grpo", ["correctness"], cuda=True)
    assert not {"perf/mfu", "perf/gpu_memory_gb"} & metrics.names("grpo", ["correctness"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is what a machine without CUDA gets")
def test_the_gpu_check_refuses_at_once_without_cuda():
    script = Path(__file__).resolve().parents[2] / "bench" / "gpu_check.sh"
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                            timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "no CUDA device" in result.stderr
