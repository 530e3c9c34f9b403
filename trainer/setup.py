"""Everything a training loop needs, built once: models, optimizer, task, rewards, writer."""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from typing import Any, Callable

import torch

import rewards
from rundir.writer import RunWriter
from trainer.config import BUILTIN_TASKS, Config, ConfigError
from trainer.tasks import Task, arithmetic


@dataclass
class Components:
    cfg: Config
    device: torch.device
    policy: torch.nn.Module
    tokenizer: Any
    reference: torch.nn.Module | None  # None when beta == 0: no reference model is loaded
    optimizer: torch.optim.Optimizer
    task: Task
    reward_fns: dict[str, tuple[Callable, float]]
    writer: RunWriter
    log: logging.Logger
    builtin_model: bool
    value_model: torch.nn.Module | None = None  # PPO only

    def models(self) -> dict[str, torch.nn.Module]:
        """The trained models, by checkpoint file name."""
        out = {"model": self.policy}
        if self.value_model is not None:
            out["value"] = self.value_model
        return out


def build_rewards(cfg: Config) -> dict[str, tuple[Callable, float]]:
    out = {}
    for name, weight in cfg.rewards.items():
        try:
            out[name] = (rewards.build(name, **cfg.reward_params.get(name, {})), float(weight))
        except (ValueError, ImportError, AttributeError, TypeError) as exc:
            raise ConfigError(f"rewards: {str(exc).splitlines()[0]}") from None
    return out


def build_task(cfg: Config) -> Task:
    if cfg.task in BUILTIN_TASKS:
        return arithmetic(cfg.task_max_operand)
    raise ConfigError(f"task: unknown task {cfg.task!r}; allowed: {', '.join(BUILTIN_TASKS)}")


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def make_optimizer(cfg: Config, params) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
