"""Checkpoints: safetensors weights, optimizer state, RNG state and the step, written atomically.

checkpoints/step-NNNNNNNN/{model.safetensors, optimizer.pt, rng.pt, meta.json}; the folder is
built under a temporary name and renamed, so a checkpoint on disk is always whole.

A checkpoint is input: a run folder may come from someone else, and a pickle can name any function
to call. So nothing is unpickled but tensors, numbers, strings and containers (torch.load with
weights_only=True): rng.pt holds the generators' states as tensors and numbers (RNG_FORMAT). An
rng.pt of the earlier format (python's state as a tuple, numpy's as a tuple with an ndarray) still
loads, with numpy's array rebuilders allowed for that one load (LEGACY_NUMPY): they build an array
from bytes and call nothing else. Anything else (a file naming another global, a damaged file, a
state of the wrong shape) is refused by `check` and `load` in one line naming the file, before any
of it is used.
"""

from __future__ import annotations

import random
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from numpy._core.multiarray import _reconstruct
from safetensors.torch import load_model, save_file, save_model

from grpo_lab.rundir.layout import read_json, write_json_atomic
from grpo_lab.trainer.config import ConfigError
from grpo_lab.trainer.distributed import Dist, on_cpu

INITIAL = "initial"  # the policy as RL started (after any warm start): the frozen reference
RNG_FORMAT = 2  # rng.pt: tensors and numbers (1, unnamed in the file: python's and numpy's own objects)
# What an rng.pt of format 1 needs to unpickle numpy's key array (numpy 1 wrote the module as numpy.core)
LEGACY_NUMPY = [_reconstruct, (_reconstruct, "numpy.core.multiarray._reconstruct"), np.ndarray, np.dtype,
                type(np.dtype(np.uint32))]


def rng_state() -> dict:
    """The torch, CUDA, Python and NumPy generators' states as tensors and numbers (RNG_FORMAT)."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "format": RNG_FORMAT,
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": {"version": version, "state": torch.tensor(internal, dtype=torch.int64), "gauss": gauss},
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
    }


def set_rng_state(state: dict) -> None:
    """Restore what `rng_states` checked (the generators' own forms)."""
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])


def rng_states(data) -> dict:
    """rng.pt's content (either format) as the generators take it, each state tried on a throwaway
    generator first; ValueError saying what is wrong otherwise."""
    if not isinstance(data, dict) or not {"torch", "python", "numpy"} <= set(data):
        raise ValueError("not the RNG states a checkpoint holds")
    py, npy = data["python"], data["numpy"]
    if data.get("format") == RNG_FORMAT:
        if not (isinstance(py, dict) and isinstance(npy, dict) and isinstance(py.get("state"), torch.Tensor)
                and isinstance(npy.get("keys"), torch.Tensor)):
            raise ValueError("python or numpy state is not a tensor")
        py = (py.get("version"), tuple(int(v) for v in py["state"].tolist()), py.get("gauss"))
        npy = (npy.get("kind"), npy["keys"].numpy().astype(np.uint32), npy.get("pos"), npy.get("has_gauss"),
               npy.get("cached_gaussian"))
    cuda = data.get("cuda", [])
    if not (isinstance(data["torch"], torch.Tensor) and isinstance(cuda, list)
            and all(isinstance(t, torch.Tensor) and t.dtype == torch.uint8 for t in cuda)):
        raise ValueError("torch or cuda state is not a byte tensor")
    try:  # the generators' own checks, on generators nobody uses
        torch.Generator().set_state(data["torch"])
        random.Random().setstate(py)
        np.random.RandomState().set_state(npy)
    except (TypeError, ValueError, RuntimeError, OverflowError) as exc:
        raise ValueError(f"a generator refuses its state ({_first_line(exc)})") from None
    return {"torch": data["torch"], "cuda": cuda, "python": py, "numpy": npy}


def load_data(path: Path, legacy_numpy: bool = False, mmap: bool = False):
    """torch.load of a checkpoint file that unpickles data only; ConfigError naming the file when
    it holds anything else (nothing of it has run: the weights-only unpickler never calls it).
    mmap: tensors stay on disk (a check need not read a large optimizer state)."""
    try:
        if legacy_numpy:
            with torch.serialization.safe_globals(LEGACY_NUMPY):
                return torch.load(path, weights_only=True, mmap=mmap)
        return torch.load(path, weights_only=True, mmap=mmap)
    except Exception as exc:  # noqa: BLE001 - pickle, zip and torch errors alike mean "not loadable as data"
        raise ConfigError(f"resume: {path} cannot be loaded as data ({_why(exc)}); it is not used and "
                          "nothing in it ran") from None


def _why(exc: Exception) -> str:
    text = str(exc)
    if named := re.search(r"GLOBAL ([\w.]+)", text):
        return f"it names {named.group(1)}, which a checkpoint never holds"
    return f"{type(exc).__name__}: {_first_line(exc) or 'unreadable'}"


def _first_line(exc: Exception) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    detail = [ln for ln in lines if "WeightsUnpickler error" not in ln and "weights_only" not in ln]
    return ((detail or lines or [""])[0])[:200]


def load_rng(path: Path) -> dict:
    """rng.pt checked (`rng_states`); ConfigError naming the file when it cannot be used."""
    data = load_data(path, legacy_numpy=True)
    try:
        return rng_states(data)
    except ValueError as exc:
        raise ConfigError(f"resume: {path} is not a checkpoint's RNG state ({exc}); it is not used") from None


def check(path: Path | None) -> None:
    """Refuse (ConfigError, one line naming the file) a checkpoint that `load` could not use safely:
    called with the resume's other checks, before the run directory is touched."""
    if path is None:
        return
    meta = read_json(path / "meta.json") or {}
    if isinstance(meta.get("step"), bool) or not isinstance(meta.get("step"), int) or meta["step"] < 0:
        raise ConfigError(f"resume: {path / 'meta.json'} has no step (a whole number >= 0)")
    if (path / "optimizer.pt").is_file():
        if not isinstance(load_data(path / "optimizer.pt", mmap=True), dict):
            raise ConfigError(f"resume: {path / 'optimizer.pt'} is not an optimizer state")
        load_rng(path / "rng.pt")


@dataclass(frozen=True)
class Retention:
    """Which periodic checkpoints stay on disk (a fork starts from one): the newest `keep`, and each
    step divisible by `every` (0: none) while everything kept fits in `budget_bytes` (0: no limit).
    Past the budget the oldest every-N ones go first; the newest `keep` always stay."""

    keep: int
    every: int = 0
    budget_bytes: float = 0

    @classmethod
    def of(cls, cfg) -> "Retention":
        return cls(keep=cfg.keep_checkpoints, every=cfg.keep_every, budget_bytes=cfg.checkpoint_budget_gb * 1e9)


def retained(sizes: dict[int, int], policy: Retention) -> set[int]:
    """The steps to keep, given each periodic checkpoint's step and size in bytes.

    >>> sizes = {s: 10 for s in (10, 20, 30, 40, 50, 60)}
    >>> sorted(retained(sizes, Retention(keep=2)))
    [50, 60]
    >>> sorted(retained(sizes, Retention(keep=2, every=20)))
    [20, 40, 50, 60]
    >>> sorted(retained(sizes, Retention(keep=2, every=20, budget_bytes=35)))  # 50 and 60, then room for one
    [40, 50, 60]
    >>> sorted(retained(sizes, Retention(keep=2, every=20, budget_bytes=5)))  # the newest stay, over budget or not
    [50, 60]
    """
    steps = sorted(sizes)
    newest = set(steps[-policy.keep:])
    spare = sorted((s for s in steps if s not in newest and policy.every and s % policy.every == 0), reverse=True)
    kept, used = set(newest), sum(sizes[s] for s in newest)
    for step in spare:  # newest first: past the budget, the oldest are the ones left out
        if policy.budget_bytes and used + sizes[step] > policy.budget_bytes:
            break
        kept.add(step)
        used += sizes[step]
    return kept


def size_of(folder: Path) -> int:
    """Bytes of the files in a checkpoint folder (a hard link from a fork's parent counts in full)."""
    return sum(f.stat().st_size for f in folder.iterdir() if f.is_file())


def save(folder: Path, step: int, models: dict[str, torch.nn.Module | dict], optimizer=None,
         keep: int | Retention | None = None) -> Path:
    """Write checkpoint `step`; then keep the periodic ones `keep` retains (a number: the newest that
    many). A model or the optimizer may be given as its full state dict (FSDP gathers them:
    save_checkpoint below)."""
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
        policy = keep if isinstance(keep, Retention) else Retention(keep)
        found = {int(p.name.removeprefix("step-")): p for p in periodic(folder)}
        kept = retained({s: size_of(p) for s, p in found.items()}, policy)
        for old_step, old in found.items():
            if old_step not in kept:
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
        optimizer.load_state_dict(load_data(path / "optimizer.pt"))
        set_rng_state(load_rng(path / "rng.pt"))
    return int(read_json(path / "meta.json")["step"])


# --- several processes: the whole state saved by rank 0, restored on every rank -------------------------


def save_checkpoint(d: Dist, folder: Path, step: int, *, models: dict[str, torch.nn.Module],
                    optimizer: torch.optim.Optimizer, keep: int | Retention | None = None) -> None:
    """One process: `save`. ddp: rank 0 saves its replica. fsdp: every rank gives its shards, rank 0
    saves the whole weights and optimizer state in the same files and format, so any world size and
    strategy can resume it. `models`: the trained models by file name (Components.models)."""
    if d.strategy != "fsdp" or not d.active:
        if d.writer:
            save(folder, step, models, optimizer, keep)
        return
    from torch.distributed.checkpoint.state_dict import (  # noqa: PLC0415
        StateDictOptions, get_model_state_dict, get_optimizer_state_dict)

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    weights = {key: _untied(m, get_model_state_dict(m, options=options)) for key, m in models.items()}
    optim = get_optimizer_state_dict(torch.nn.ModuleDict(models), optimizer, options=options)
    if d.writer:
        save(folder, step, weights, _indexed_optimizer_state(optim), keep)


def resume_latest(d: Dist, folder: Path, *, models: dict[str, torch.nn.Module],
                  optimizer: torch.optim.Optimizer) -> int:
    """Restore the newest checkpoint in `folder` on every process; its step (0: none yet).

    Rank 0 reads it and sends it to the others, so only rank 0's machine needs the runs folder.
    ddp: rank 0 loads, then its weights and optimizer state are broadcast; fsdp: rank 0 reads the
    whole state dicts and every rank keeps its shards of them (broadcast_from_rank0)."""
    newest = d.broadcast(latest(folder) if d.writer else None)
    if newest is None:
        return 0
    if not d.active:
        return load(newest, models, optimizer)
    if d.strategy == "ddp":
        step = load(newest, models, optimizer) if d.writer else 0
        for model in models.values():
            d.sync_weights(model)
        state = d.broadcast(on_cpu(optimizer.state_dict()) if d.writer else None)
        if not d.writer:
            optimizer.load_state_dict(state)
        return d.broadcast(step)
    from safetensors.torch import load_file  # noqa: PLC0415
    from torch.distributed.checkpoint.state_dict import (  # noqa: PLC0415
        StateDictOptions, set_model_state_dict, set_optimizer_state_dict)

    # tied weights are stored once (strict off); the other ranks pass empty dicts and receive theirs
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True, strict=False)
    for key, model in models.items():
        set_model_state_dict(model, load_file(str(newest / f"{key}.safetensors")) if d.writer else {},
                             options=options)
    if d.broadcast((newest / "optimizer.pt").is_file() if d.writer else None):
        state = torch.load(newest / "optimizer.pt", weights_only=True) if d.writer else None
        set_optimizer_state_dict(torch.nn.ModuleDict(models), optimizer,
                                 _named_optimizer_state(state, optimizer, models) if d.writer else {},
                                 options=options)
    return d.broadcast(int(read_json(newest / "meta.json")["step"]) if d.writer else None)


def _untied(model: torch.nn.Module, state: dict) -> dict:
    """The state dict less the second name of a tied weight (as save_model stores it, so that
    load_model, which refuses both names, reads it)."""
    every = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    once = {name for name, _ in model.named_parameters()}
    return {k: v for k, v in state.items() if k not in every - once}


def _indexed_optimizer_state(named: dict) -> dict:
    """A full optimizer state keyed by parameter name (torch.distributed.checkpoint's form) in
    optimizer.state_dict()'s form: parameters numbered in param-group order."""
    index: dict[str, int] = {}
    groups = []
    for group in named["param_groups"]:
        ids = [index.setdefault(name, len(index)) for name in group["params"]]
        groups.append({**group, "params": ids})
    return {"state": {index[name]: s for name, s in named["state"].items()}, "param_groups": groups}


def _named_optimizer_state(indexed: dict, optimizer, models: dict) -> dict:
    """The reverse of _indexed_optimizer_state, for this optimizer's parameters."""
    names = {id(p): name for name, p in torch.nn.ModuleDict(models).named_parameters()}
    order = [names[id(p)] for group in optimizer.param_groups for p in group["params"]]
    groups = [{**g, "params": [order[i] for i in g["params"]]} for g in indexed["param_groups"]]
    return {"state": {order[i]: s for i, s in indexed["state"].items()}, "param_groups": groups}
