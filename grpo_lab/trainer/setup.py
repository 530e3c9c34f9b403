"""Building what a training loop needs, once: rewards (and their dry run), tasks, the reference, the optimizer.

run.py puts them together into a `components.Components`.
"""

from __future__ import annotations

import copy
import re
from typing import Callable

import torch

from grpo_lab import rewards
from grpo_lab.trainer import environment_setup
from grpo_lab.trainer.config import Config, ConfigError
from grpo_lab.trainer import multiturn
from grpo_lab.trainer.scoring import make_trainer_state, reward_inputs
from grpo_lab.trainer.tasks import Task

def build_rewards(cfg: Config) -> dict[str, tuple[Callable, float]]:
    # an environment class with get_reward is a reward source of its own, as TRL makes it; config.json
    # lists it among the rewards under its class name (so a resumed run reads it back): added, not built
    own = environment_setup.source_name(cfg.environment)
    out = {}
    for name, weight in cfg.rewards.items():
        if name == own:
            continue
        try:
            out[name] = (rewards.build(name, **cfg.reward_params.get(name, {})), float(weight))
        except (ValueError, ImportError, AttributeError, TypeError) as exc:
            raise ConfigError(f"rewards: {str(exc).splitlines()[0]}") from None
    return out | environment_setup.run_rewards(cfg.environment, out, cfg.rewards.get(own))


# A TypeError that Python raises for a call that does not fit a signature (an inner call's, when
# the reward's own signature took the call): the reward cannot work with the trainer's call.
SIGNATURE_TYPE_ERROR = re.compile(r"unexpected keyword argument|missing \d+ required|takes \d+ positional "
                                  r"argument|got multiple values for argument|takes no (keyword )?arguments")
DRY_RUN_ROWS = 2


def dry_run(cfg: Config, reward_fns: dict[str, tuple[Callable, float]], task: Task) -> list[str]:
    """Call each reward once on the task's first rows with a dummy completion ("0"), as the
    trainer will call it, before any model loads: a reward whose signature does not take the
    call is refused here (a ConfigError, one line), not after a model load and a step. Any other
    failure is returned as a warning line: the reward may only dislike the dummy completion."""
    rows = task.rows[:DRY_RUN_ROWS]
    turns = [[{"model": "0"}] for _ in rows] if (cfg.tools or cfg.environment) else None  # tools: tool_calls too
    prompts, completions, columns = reward_inputs(rows, ["0"] * len(rows), 1, turns=turns,
                                                  environments=dry_run_environments(cfg, rows))
    columns = {k: v for k, v in columns.items() if k not in rewards.CALL_ARGS}
    warnings = []
    for name, (fn, _weight) in reward_fns.items():
        kwargs = {"prompts": prompts, "completions": completions, "completion_ids": [[0] for _ in rows], **columns,
                  "trainer_state": make_trainer_state(cfg, len(task.rows), 1), "log_extra": lambda *a: None,
                  "log_metric": lambda *a: None}
        try:
            rewards.call_reward(fn, kwargs)
        except rewards.SignatureError as exc:
            raise ConfigError(f"rewards: reward {name!r} cannot take the trainer's call (TRL's): {exc}") from None
        except TypeError as exc:
            text = " ".join(str(exc).split())[:300]
            if SIGNATURE_TYPE_ERROR.search(text):
                raise ConfigError(f"rewards: reward {name!r} raised TypeError: {text} (on a dry run with the trainer's "
                                  f"call: {', '.join(kwargs)})") from None
            warnings.append(f"reward {name!r} raised TypeError on a dry run with a dummy completion: {text}")
        except Exception as exc:  # noqa: BLE001 - a reward's own failure: the run doctor watches the real steps
            text = " ".join(str(exc).split())[:300]
            warnings.append(f"reward {name!r} raised {type(exc).__name__} on a dry run with a dummy completion: {text}")
    return warnings


def dry_run_environments(cfg: Config, rows: list[dict]) -> list | None:
    """With --environment, an instance per row, reset with it as the rollouts' are (TRL's
    `environments` keyword); a reset that raises on the task's own rows is a ConfigError."""
    setup = multiturn.build_setup(cfg, None)
    if setup is None or setup.environment is None:
        return None
    try:
        return [setup.for_row(row)[1] for row in rows]
    except Exception as exc:  # noqa: BLE001 - the user's class: whatever it raises, said in one line
        text = " ".join(str(exc).split())[:200]
        raise ConfigError(f"environment: {cfg.environment}: reset(**row) raised {type(exc).__name__} on the "
                          f"task's first row: {text}") from None


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def make_optimizer(cfg: Config, params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """AdamW. Fused (one kernel over all parameters, TRL's default too) where torch has it: on
    SmolLM2 on a CPU a step takes 0.09 s instead of foreach's 0.39 s (bench/bench_vs_trl.py). FSDP's
    sharded parameters keep the foreach path."""
    fused = cfg.strategy != "fsdp" and all(p.device.type in ("cpu", "cuda") for p in params)
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, fused=fused or None)
