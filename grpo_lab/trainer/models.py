"""Load the policy and its tokenizer: the built-in tiny model, smollm2, or a Hugging Face causal LM.

Model options (config): dtype, gradient checkpointing, LoRA adapters through peft.
"""

from __future__ import annotations

from pathlib import Path

import torch

from grpo_lab.trainer.config import BUILTIN_MODELS, ConfigError
from grpo_lab.trainer import smollm, tiny
from grpo_lab.trainer.hub import hub_reachable, looks_local
from grpo_lab.trainer.preflight import check_model_folder


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device: {name!r} asked for, but CUDA is not available here; use auto or cpu")
    return torch.device(name)


def pick_dtype(name: str, device: torch.device, builtin: bool) -> torch.dtype:
    """auto: bfloat16 for a pretrained model on a GPU that has it, else float32 (the tiny model stays float32)."""
    if name == "auto":
        bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported() and not builtin
        return torch.bfloat16 if bf16 else torch.float32
    if name == "float16" and device.type != "cuda":
        raise ConfigError("dtype: float16 needs a GPU; on CPU use float32 or bfloat16")
    return getattr(torch, name)


def load_policy(model: str, seed: int, device: torch.device, dtype: str = "auto",
                gradient_checkpointing: bool = False, lora_r: int = 0, lora_alpha: float = 16.0,
                lora_target_modules: str = "all-linear"):
    """(model, tokenizer, builtin) with the model in eval mode on `device`.

    Eval mode switches dropout off, so log-probabilities are a deterministic function of the
    weights: pi_old and the first pass's pi_theta agree exactly. Gradients still flow.
    """
    builtin = model in BUILTIN_MODELS
    torch_dtype = pick_dtype(dtype, device, builtin)
    if builtin:
        tokenizer = tiny.build_tokenizer()
        policy = tiny.build_model(tokenizer, seed).to(torch_dtype)
    else:
        source = str(smollm.ensure_converted()) if model == smollm.ALIAS else model
        policy, tokenizer = _load_pretrained(source, torch_dtype, shown_as=model)
    if gradient_checkpointing:
        enable_gradient_checkpointing(policy)
    if lora_r:
        policy = add_lora(policy, lora_r, lora_alpha, lora_target_modules)
    return policy.to(device).eval(), tokenizer, builtin


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The model under a DDP wrapper: what samples (no gradient to sync) and what checkpoints name
    their weights after, as one process does."""
    return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model


def _load_pretrained(model: str, dtype: torch.dtype, shown_as: str | None = None):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    shown_as = shown_as or model
    check_model_folder(model)
    local = looks_local(model)
    path = str(Path(model).expanduser()) if local else model
    cache_only = not local and not hub_reachable()
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=cache_only)
        policy = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=cache_only)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"model: cannot load {shown_as!r} ({str(exc).splitlines()[0][:200]}); offline, point --model at a local "
            "copy (a directory with config.json and weights, e.g. from save_pretrained) or use 'tiny' or 'smollm2'"
        ) from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return policy, tokenizer


def enable_gradient_checkpointing(policy) -> None:
    """Recompute each decoder layer's activations in the backward pass instead of keeping them.

    transformers checkpoints a layer only while it is in training mode, and a layer in training
    mode also drops its KV cache, which would make generation quadratic. The policy stays in eval
    mode (no dropout); a pre-hook flips just the decoder layers' own `training` flag to follow the
    grad mode: on in the forward passes that will be differentiated, off under no_grad (sampling,
    pi_old, pi_ref). Their submodules (attention, MLP) stay in eval mode, so dropout stays off.
    """
    from transformers.modeling_layers import GradientCheckpointingLayer

    try:
        policy.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    except (ValueError, AttributeError) as exc:
        raise ConfigError(f"gradient_checkpointing: this model does not support it ({exc})") from None
    layers = [m for m in policy.modules() if isinstance(m, GradientCheckpointingLayer)]

    def follow_grad_mode(_module, _args) -> None:
        for layer in layers:
            layer.training = torch.is_grad_enabled()

    policy.register_forward_pre_hook(follow_grad_mode)


def add_lora(policy, r: int, alpha: float, target_modules: str):
    """Wrap the policy with LoRA adapters: only the adapters train; the base weights are frozen."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise ConfigError("lora_r: LoRA needs the peft package: pip install peft==0.21.2") from None
    targets = target_modules.strip()
    modules = targets if targets == "all-linear" else [t.strip() for t in targets.split(",") if t.strip()]
    config = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=0.0, target_modules=modules, task_type="CAUSAL_LM")
    try:
        return get_peft_model(policy, config)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"lora_target_modules: {str(exc).splitlines()[0][:200]}") from None
