"""Load the policy and its tokenizer: the built-in tiny model, or a Hugging Face causal LM."""

from __future__ import annotations

from pathlib import Path

import torch

from trainer.config import BUILTIN_MODELS, ConfigError
from trainer import tiny


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device: {name!r} asked for, but CUDA is not available here; use auto or cpu")
    return torch.device(name)


def load_policy(model: str, seed: int, device: torch.device):
    """(model, tokenizer, builtin) with the model in eval mode on `device`.

    Eval mode switches dropout off, so log-probabilities are a deterministic function of the
    weights: pi_old and the first pass's pi_theta agree exactly. Gradients still flow.
    """
    if model in BUILTIN_MODELS:
        tokenizer = tiny.build_tokenizer()
        policy = tiny.build_model(tokenizer, seed)
        builtin = True
    else:
        policy, tokenizer = _load_pretrained(model)
        builtin = False
    return policy.to(device).eval(), tokenizer, builtin


def _load_pretrained(model: str):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    looks_local = model.startswith((".", "/", "~")) or Path(model).exists()
    if looks_local and not Path(model).expanduser().is_dir():
        raise ConfigError(f"model: no model directory at {model!r}; use 'tiny' or a Hugging Face model directory or id")
    try:
        tokenizer = AutoTokenizer.from_pretrained(model)
        policy = AutoModelForCausalLM.from_pretrained(model)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"model: cannot load {model!r} ({str(exc).splitlines()[0][:200]}); offline, point --model at a local "
            "copy (a directory with config.json and weights) or use 'tiny'") from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return policy, tokenizer
