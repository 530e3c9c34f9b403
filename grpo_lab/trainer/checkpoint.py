"""Checkpoints: safetensors weights, optimizer state, RNG state and the step, written atomically.

checkpoints/step-NNNNNNNN/{model.safetensors, optimizer.pt, rng.pt, meta.json}; the folder is
built under a temporary name and renamed, so a checkpoint on disk is always whole.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_model, save_file, save_model

from grpo_lab.rundir.layout import read_json, write_json_atomic

INITIAL = "initial"  # the policy as RL started (after any warm start): the frozen reference


def rng_state() -> dict:
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": random.getstate(),
        "numpy": np.random.get_state(),
    }


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])


def save(folder: Path, step: int, models: dict[str, torch.nn.Module | dict], optimizer=None,
         keep: int | None = None) -> Path:
    """Write checkpoint `step`; keep only the newest `keep` periodic ones. A model or the optimizer
    may be given as its full state dict (FSDP gathers them: grpo_lab/trainer/distributed.py)."""
    folder.mkdir(parents=True, exist_ok=True)
    name = INITIAL if step < 0 else f"step-{step:08d}"
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder))
    for key, model in models.items():
        if isinstance(model, dict):
            save_file(_unshared(model), str(tmp / f"{key}.safetensors"), metadata={"format": "pt"})
        else:
            save_model(model, str(tmp / f"{key}.safetensors"))
    if optimizer is not None:
        torch.save(optimizer if isinstance(optimizer, dict) else optimizer.state_dict(), tmp / "optimizer.pt")
        torch.save(rng_state(), tmp / "rng.pt")
    write_json_atomic(tmp / "meta.json", {"step": step})
    final = folder / name
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    if keep is not None:
        for old in periodic(folder)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    return final


def _unshared(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A state dict safetensors accepts: a tensor stored under two names (tied embeddings) kept
    under the first; loading fills the tied one (as save_model / load_model do)."""
    seen, out = set(), {}
    for key, tensor in state.items():
        if tensor.data_ptr() in seen:
            continue
        seen.add(tensor.data_ptr())
        out[key] = tensor.contiguous()
    return out


def remove_partial(folder: Path) -> None:
    """Delete .tmp-* folders a killed save left behind (a complete checkpoint is renamed into place)."""
    for tmp in folder.glob(".tmp-*") if folder.is_dir() else ():
        shutil.rmtree(tmp, ignore_errors=True)


def periodic(folder: Path) -> list[Path]:
    """Complete periodic checkpoints, oldest first."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("step-*") if (p / "meta.json").is_file())


def latest(folder: Path) -> Path | None:
    found = periodic(folder)
    return found[-1] if found else None


def load(path: Path, models: dict[str, torch.nn.Module], optimizer=None) -> int:
    """Restore weights (and optimizer and RNG when present); returns the checkpoint's step."""
    for key, model in models.items():
        load_model(model, str(path / f"{key}.safetensors"))
    if optimizer is not None and (path / "optimizer.pt").is_file():
        optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True))
        set_rng_state(torch.load(path / "rng.pt", weights_only=False))
    return int(read_json(path / "meta.json")["step"])
