"""The trainer's options as the launch form shows them: default, help text, choices and bounds, for a model and a task."""

from __future__ import annotations

import functools
from typing import Any


@functools.lru_cache(maxsize=1)
def config_fields(model: str = "tiny", task: str | None = None) -> dict[str, Any]:
    """Every trainer option with its default for `model` (and built-in `task`: TASK_DEFAULTS) and
    its help text (trainer.config.Config); `by_model` marks the options whose default depends on the
    model or task; `bounds`, the numbers the trainer allows (trainer.config.Bounds, or None)."""
    import dataclasses

    from grpo_lab.trainer.config import BUILTIN_MODELS, MODEL_DEFAULTS, TASK_DEFAULTS, Config

    kind = "builtin" if model in BUILTIN_MODELS else "pretrained"
    # reward_params is not on the form: the trainer merges the task's values under what is sent
    by_task = {k: v for k, v in TASK_DEFAULTS.get((kind, task), {}).items() if not isinstance(v, dict)}
    by_model = MODEL_DEFAULTS[kind] | by_task
    out = {}
    for f in dataclasses.fields(Config):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        out[f.name] = {"default": by_model.get(f.name, default), "help": f.metadata.get("help", ""),
                       "choices": f.metadata.get("choices"), "by_model": f.name in by_model,
                       "bounds": f.metadata.get("bounds")}
    return out
