"""What a step costs on a CUDA device: model FLOPs utilisation and peak memory (perf/mfu, perf/gpu_memory_gb).

FLOPs are counted the usual way for a decoder (Kaplan et al. 2020, "Scaling Laws for Neural Language
Models", arXiv:2001.08361): 2 N per token through a forward pass, 6 N through a forward and a
backward, N the parameters. Attention's own FLOPs and the reference / pi_old forwards are left out,
so the figure is a lower bound of what the device did.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch

from grpo_lab.rundir.metrics import named

PEAK_ENV = "GRPO_LAB_PEAK_TFLOPS"
# Dense bf16 tensor-core peaks in TFLOP/s (the vendors' data sheets), by a piece of
# torch.cuda.get_device_name(); the first match counts, so longer names come first.
PEAK_TFLOPS = (("H200", 989.0), ("H100 PCIe", 756.0), ("H100", 989.0), ("A100", 312.0), ("L40S", 362.0),
               ("L4", 121.0), ("A10G", 70.0), ("A10", 125.0), ("RTX 4090", 165.0))


def peak_flops(device_name: str) -> float:
    """The device's peak in FLOP/s: GRPO_LAB_PEAK_TFLOPS when set, else the table; NaN when unknown.

    >>> peak_flops("NVIDIA H200")
    989000000000000.0
    >>> math.isnan(peak_flops("a device nobody listed"))
    True
    """
    if os.environ.get(PEAK_ENV):
        return float(os.environ[PEAK_ENV]) * 1e12
    return next((tflops * 1e12 for key, tflops in PEAK_TFLOPS if key in device_name), math.nan)


def model_flops(params: int, sampled_tokens: int, trained_tokens: int) -> float:
    """2 N per sampled token (a forward), 6 N per trained token (forward and backward).

    >>> model_flops(1_000, sampled_tokens=10, trained_tokens=10)
    80000.0
    """
    return 2.0 * params * sampled_tokens + 6.0 * params * trained_tokens


@dataclass
class GpuPerf:
    params: int  # the policy's parameters
    peak: float  # FLOP/s; NaN: unknown
    device: torch.device

    @classmethod
    def of(cls, model: torch.nn.Module, device: torch.device) -> "GpuPerf":
        return cls(params=sum(p.numel() for p in model.parameters()),
                   peak=peak_flops(torch.cuda.get_device_name(device)), device=device)

    def synchronize(self) -> None:
        """Wait for the work queued on the device (the phase timer's edges: timing.py)."""
        torch.cuda.synchronize(self.device)

    def scalars(self, sampled_tokens: int, trained_tokens: int, seconds: float) -> dict[str, float]:
        """The step's figures; starts the next step's peak-memory count."""
        achieved = model_flops(self.params, sampled_tokens, trained_tokens) / seconds if seconds > 0 else math.nan
        memory = torch.cuda.max_memory_allocated(self.device) / 1e9
        torch.cuda.reset_peak_memory_stats(self.device)
        return {named("perf/mfu"): achieved / self.peak, named("perf/gpu_memory_gb"): memory}
