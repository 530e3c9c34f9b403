"""Checkpoint retention (grpo_lab/trainer/checkpoint.py Retention): the newest few, every N-th step for
forks within a disk budget; the rule itself is retained()'s doctest, here the folders on disk."""

from __future__ import annotations

import pytest
import torch

from grpo_lab.rundir.forks import forkable_steps
from grpo_lab.trainer import checkpoint
from grpo_lab.trainer.config import ConfigError, from_dict


def _stepped(model: torch.nn.Module) -> torch.optim.Optimizer:
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 64)).sum().backward()
    optimizer.step()  # AdamW's moments exist from the first step on
    return optimizer


def _save_steps(folder, policy, steps=range(1, 7)) -> list[int]:
    model = torch.nn.Linear(64, 64)
    optimizer = _stepped(model)
    checkpoint.save(folder, -1, {"model": model})
    for step in steps:
        checkpoint.save(folder, step, {"model": model}, optimizer, policy)
    return [int(p.name.removeprefix("step-")) for p in checkpoint.periodic(folder)]


def test_every_nth_checkpoint_stays_beside_the_newest_and_can_be_forked(tmp_path):
    assert _save_steps(tmp_path / "checkpoints", checkpoint.Retention(keep=2, every=2)) == [2, 4, 5, 6]
    assert forkable_steps(tmp_path) == [2, 4, 5, 6]


def test_past_the_budget_the_oldest_every_nth_go_first(tmp_path):
    one = checkpoint.size_of(checkpoint.save(tmp_path / "sizing", 1, {"model": torch.nn.Linear(64, 64)},
                                             _stepped(torch.nn.Linear(64, 64))))
    assert one > 3 * 4 * 64 * 65  # weights and AdamW's two moments, and the random state
    policy = checkpoint.Retention(keep=2, every=1, budget_bytes=3.5 * one)
    assert _save_steps(tmp_path / "checkpoints", policy) == [4, 5, 6]


def test_a_plain_number_keeps_the_newest_as_before(tmp_path):
    assert _save_steps(tmp_path / "checkpoints", 2) == [5, 6]


def test_keep_every_must_fall_on_checkpointed_steps():
    with pytest.raises(ConfigError, match=r"^keep_every: must be a multiple of checkpoint_every \(10\)"):
        from_dict({"checkpoint_every": 10, "keep_every": 15, "name": "r"})
