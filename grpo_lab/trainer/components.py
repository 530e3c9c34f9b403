"""Everything a step reads and writes, built once by run.py's `prepare` (from the pieces setup.py makes):
models, optimizer, task, rewards, writer.

Its own module so that every stage of the step (sampling.py, scoring.py, advantages.py, logprobs.py,
records.py) can name the type without importing run.py, which builds it. What a step finds out (its
scalars, the rewards' failures, a skipped update) is not written here: the step returns it
(step_result.StepResult).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from grpo_lab.rundir.layout import RunLock
from grpo_lab.rundir.writer import RunWriter
from grpo_lab.trainer.config import Config
from grpo_lab.trainer.distributed import Dist
from grpo_lab.trainer.models import unwrap
from grpo_lab.trainer.tasks import Task
from grpo_lab.trainer.timing import PhaseTimer


@dataclass
class Components:
    cfg: Config
    device: torch.device
    policy: torch.nn.Module
    tokenizer: Any
    reference: torch.nn.Module | None  # None when beta == 0 without measure_kl: no reference model is loaded
    optimizer: torch.optim.Optimizer
    task: Task
    reward_fns: dict[str, tuple[Callable, float]]
    writer: RunWriter
    log: logging.Logger
    builtin_model: bool
    value_model: torch.nn.Module | None = None  # PPO only
    eval_task: Task | None = None  # held-out prompts (eval_every > 0)
    lock: RunLock | None = None  # held while this process writes the run (rundir.layout.RunLock)
    timer: PhaseTimer = field(default_factory=PhaseTimer)  # seconds per phase of the current step
    extra_kinds: dict[str, str] = field(default_factory=dict)  # log_extra column -> "number" or "text" (records)
    dist: Dist = field(default_factory=Dist)  # this process's place among several (grpo_lab/trainer/distributed.py)
    stop_requested: Callable[[], bool] = lambda: False  # a stop signal arrived (run.py's StopRequested)

    def __post_init__(self) -> None:
        if self.device.type == "cuda":
            from grpo_lab.trainer.perf import GpuPerf

            self.timer.gpu = GpuPerf.of(unwrap(self.policy), self.device)

    def models(self) -> dict[str, torch.nn.Module]:
        """The trained models, by checkpoint file name (under DDP, the wrapped models)."""
        out = {"model": unwrap(self.policy)}
        if self.value_model is not None:
            out["value"] = self.value_model
        return out
