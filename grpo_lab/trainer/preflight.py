"""What the trainer can refuse before torch and transformers load (4-5 s of a start on a 2-core
machine): a reward name nobody registered, a model folder that is not there. The checks that need
the libraries (a reward's dry run, a hub id offline) still come in set-up."""

from __future__ import annotations

from pathlib import Path

from grpo_lab.trainer import smollm
from grpo_lab.trainer.config import BUILTIN_MODELS, Config, ConfigError
from grpo_lab.trainer.hub import looks_local


def check_model_folder(model: str) -> None:
    if model in BUILTIN_MODELS or model == smollm.ALIAS:
        return
    if looks_local(model) and not Path(model).expanduser().is_dir():
        raise ConfigError(f"model: no model directory at {model!r}; use 'tiny', 'smollm2' or a Hugging Face model "
                          "directory or id")


def preflight(cfg: Config) -> None:
    """Run in the trainer's own process (relative paths read from its working folder), after validate."""
    from grpo_lab.rewards import registry

    for name in cfg.rewards:
        try:
            registry.check_name(name)
        except ValueError as exc:
            raise ConfigError(f"rewards: {exc}") from None
    check_model_folder(cfg.model)
