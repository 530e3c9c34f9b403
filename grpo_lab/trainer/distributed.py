"""Several processes (torchrun, accelerate launch): DDP or FSDP2, one writer, the same algorithm.

`python -m grpo_lab.trainer` alone is one process and nothing here does anything: `Dist()` has world size
1, every method below is then the identity or a no-op, and no process group exists. Under a
launcher (WORLD_SIZE > 1 in the environment) every process runs the same loop on its share:

- Prompts: the step's `prompts_per_step` prompts (Task.batch, a function of (seed, step) only)
  are cut into world_size equal, contiguous shares; rank r takes share r. A group never spans
  two processes, so its advantages are computed where its rewards are, exactly as on one process
  (std_mode batch gathers the step's rewards first: its std is the whole step's).
- Loss: the mean over the global batch. Each process multiplies its local loss by
  world_size * local denominator / global denominator (responses with sequence aggregation,
  tokens with token aggregation), so the gradient average DDP or FSDP computes is the one-process
  gradient of the whole batch, and clip_grad_norm_ after backward clips by the global norm.
- Records: rank 0 is the only writer of the run directory (status, config, tables, checkpoints,
  events, train.log). It gathers every process's completions and per-token figures and computes
  each logged figure over all of them; group r * groups_per_rank + g is rank r's local group g.
  Timings (time/*) are rank 0's; each rank's generation and update seconds travel with the same
  gather, and rank 0 also logs the slowest and the mean rank (time/generation_s_max, ..._mean).
- Randomness: sampling on rank r at step s draws from a seed of (seed, r, s), so processes sample
  differently and a resumed run samples as the uninterrupted one did.
- Shutdown: every step ends with an all-reduce of the stop flags, so a SIGTERM one process sees
  stops all of them after the same step. A process that raises leaves "rank R: error" in the
  launcher's key-value store and exits; the others' collectives fail (gloo: at once, the peer's
  connection closes; otherwise after `collective_timeout`), and rank 0 records that error. Where a
  collective with a dead peer just waits (NCCL), a watcher thread on rank 0 records it (watch_peers).
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import logging
import os
import random
import sys
import threading
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Callable, Iterator

import numpy as np
import torch
import torch.distributed as dist

from grpo_lab.rundir.layout import read_json
from grpo_lab.rundir.metrics import named
from grpo_lab.trainer import checkpoint
from grpo_lab.trainer.config import Config, ConfigError, launched_world_size
from grpo_lab.trainer.batch import concat_batches
from grpo_lab.trainer.updates import LastPass, TokenStats

# Figures a step function adds to step_scalars' per rank; combined across ranks by rank 0.
ACROSS_RANKS = {named("groups/kept"): sum, named("groups/dropped"): sum, named("groups/sampling_rounds"): max,
                named("loss/entropy_bonus"): lambda values: sum(values) / len(values)}
# How gloo / NCCL word a collective whose peer process is gone
PEER_LOST = ("Connection closed by peer", "Connection reset by peer", "Broken pipe", "DistBackendError",
             "NCCL communicator was aborted", "Read error")
FAILURE_KEY = "grpo_lab/failure"  # in the launcher's store: the first failing rank's "rank R: error"


@dataclasses.dataclass
class Dist:
    """This process's place among the training processes; Dist() is the single process."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    strategy: str | None = None  # ddp or fsdp; None on one process
    device: torch.device | None = None  # this process's device (None: chosen by --device)
    store: Any = None  # the launcher's key-value store, where a failing process leaves its error

    @property
    def active(self) -> bool:
        return self.world_size > 1

    @property
    def sharded(self) -> bool:
        """Weights split over the processes (FSDP): each forward gathers them from all, so every
        process must run as many forwards as the others (sampling decodes in step)."""
        return self.active and self.strategy == "fsdp"

    @property
    def writer(self) -> bool:
        """The process that writes the run directory."""
        return self.rank == 0

    # --- the step's share ---------------------------------------------------------------------

    def share(self, rows: list) -> list:
        """This rank's contiguous share of a step's prompts (config checks that they divide)."""
        n = len(rows) // self.world_size
        return rows[self.rank * n:(self.rank + 1) * n]

    def seed_step(self, seed: int, step: int) -> None:
        """Several processes: reseed this rank for step `step` (sampling, minibatch shuffles)."""
        if not self.active:
            return
        digest = hashlib.sha256(f"{seed}/rank{self.rank}/step{step}".encode()).digest()
        value = int.from_bytes(digest[:4], "little")
        random.seed(value)
        np.random.seed(value)
        torch.manual_seed(value)

    # --- agreement ----------------------------------------------------------------------------

    def any(self, *flags: Any) -> tuple[bool, ...]:
        """Each flag, true when it is true on any rank (one all-reduce for all of them)."""
        if not self.active:
            return tuple(bool(f) for f in flags)
        return tuple(v > 0 for v in self.all_reduce([float(bool(f)) for f in flags], dist.ReduceOp.MAX))

    @contextmanager
    def agreed(self) -> Iterator[None]:
        """Set-up that any rank may refuse: a ConfigError (or crash) on one rank stops every rank,
        each raising ConfigError with that rank's one line (rank 0 prints it)."""
        error: BaseException | None = None
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - every rank must hear of it, then it is re-raised
            error = exc
        if not self.active:
            if error is not None:
                raise error
            return
        message = None if error is None else (str(error) if isinstance(error, ConfigError)
                                               else f"{type(error).__name__}: {error}")
        messages = [None] * self.world_size
        dist.all_gather_object(messages, message)
        first = next(((r, m) for r, m in enumerate(messages) if m is not None), None)
        if first is None:
            return
        if error is not None and not isinstance(error, ConfigError):
            raise error  # this rank's own crash keeps its traceback
        rank, text = first
        raise ConfigError(text if rank == 0 else f"rank {rank}: {text}") from None

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Every rank takes rank 0's weights (the replicas must start identical)."""
        if self.active:
            for tensor in model.state_dict().values():
                dist.broadcast(tensor, src=0)

    # --- gathering a step to rank 0 ------------------------------------------------------------

    def gather_step(self, **pieces: Any) -> dict[str, Any]:
        """Every rank's pieces of one step, merged on rank 0 into the global batch's (in rank
        order, so completion i of the merge answers global group i // G); other ranks get theirs
        back unchanged. Pieces: batch, stats, last, advantages, per_token, frac_zero_std,
        policy_losses, losses, rank_seconds (see MERGE)."""
        if not self.active:
            return pieces
        parts = [None] * self.world_size if self.writer else None
        dist.gather_object(_cpu(pieces), parts, dst=0)
        if not self.writer:
            return pieces
        return {name: MERGE[name]([p[name] for p in parts]) for name in pieces}

    def combine(self, metrics: dict[str, float]) -> dict[str, float]:
        """Rank 0's metrics with the ACROSS_RANKS figures combined over every rank."""
        if not self.active:
            return metrics
        mine = {k: v for k, v in metrics.items() if k in ACROSS_RANKS}
        parts = [None] * self.world_size if self.writer else None
        dist.gather_object(mine, parts, dst=0)
        if not self.writer:
            return metrics
        return {**metrics, **{k: ACROSS_RANKS[k]([p[k] for p in parts if k in p]) for k in mine}}

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's `obj` on every rank."""
        if not self.active:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather_object(self, obj: Any) -> list[Any] | None:
        """Every rank's `obj`, in rank order, on rank 0 (None elsewhere)."""
        if not self.active:
            return [obj]
        parts = [None] * self.world_size if self.writer else None
        dist.gather_object(obj, parts, dst=0)
        return parts

    # --- failure --------------------------------------------------------------------------------

    def report_failure(self, error: str) -> None:
        """A non-writer rank's error, left for rank 0 (the first one to fail wins)."""
        if self.store is None:
            return
        try:
            self.store.compare_set(FAILURE_KEY, "", f"rank {self.rank}: {error}")
        except Exception:  # noqa: BLE001 - the store may be gone already; the exit code still tells
            pass

    def peer_failure(self) -> str | None:
        """The error another rank reported, if one did."""
        if self.store is None:
            return None
        try:
            if self.store.check([FAILURE_KEY]):
                return self.store.get(FAILURE_KEY).decode() or None
        except Exception:  # noqa: BLE001
            return None
        return None

    def failure(self, error: str) -> str:
        """What rank 0 records when its step raised `error`: the report of the rank that failed
        first; else, when its collective lost a peer that left no report (a process killed
        outright), that, rather than blaming rank 0; else rank 0's own error."""
        if (report := self.peer_failure()) is not None:
            return report
        if any(sign in error for sign in PEER_LOST):
            return f"another process ended without a report (killed?): rank 0's collective failed: {error}"
        return f"rank 0: {error}"

    def close(self) -> None:
        if self.active and dist.is_initialized():
            # leave together: a gloo rank that tears down while a peer is still in its last collective
            # can abort at exit ("terminate called without an active exception", about 1 run in 8)
            # DDP / FSDP wrappers in reference cycles hold the group: free them first. Set-up froze
            # them out of collections (run.py), so they are let back in
            gc.unfreeze()
            gc.collect()
            dist.barrier()
            dist.destroy_process_group()

    # --- collectives on small lists --------------------------------------------------------------

    def all_reduce(self, values: list[float], op) -> list[float]:
        """`values` reduced over every process with `op` (a torch.distributed.ReduceOp)."""
        t = torch.tensor(values, dtype=torch.float64, device=self._comm_device())
        dist.all_reduce(t, op=op)
        return t.tolist()

    def all_gather_tensor(self, t: torch.Tensor) -> torch.Tensor:
        """Every process's `t`, concatenated along dim 0 in rank order."""
        local = t.to(self._comm_device())
        out = [torch.empty_like(local) for _ in range(self.world_size)]
        dist.all_gather(out, local)
        return torch.cat(out).to(t.device)

    def _comm_device(self) -> torch.device:
        return self.device if self.device is not None and self.device.type == "cuda" else torch.device("cpu")


def watch_peers(d: Dist, on_failure: Callable[[str], None], grace: float = 5.0) -> threading.Event:
    """Rank 0: a thread that waits for another rank's failure report (Dist.report_failure).

    With gloo rank 0's next collective fails as soon as the failed process exits, and rank 0 records
    the failure itself. With NCCL a collective whose peer is gone just waits, and a blocked CUDA
    call runs no Python (not even a signal handler) until `collective_timeout`. So when a report
    arrives and rank 0 has not handled it within `grace` seconds (set the returned event when it
    has, or when the run ends), on_failure(report) is called from this thread."""
    handled = threading.Event()
    if not (d.active and d.writer and d.store is not None):
        return handled

    def watch() -> None:
        while not handled.wait(1.0):
            report = d.peer_failure()
            if report:
                if not handled.wait(grace):
                    on_failure(report)
                return

    threading.Thread(target=watch, name="peer-failure-watch", daemon=True).start()
    return handled


# --- starting ----------------------------------------------------------------------------------


def launch(cfg: Config) -> Dist:
    """Join the launcher's process group when there is one (WORLD_SIZE > 1): NCCL on CUDA, gloo on
    CPU; this process's device is cuda:LOCAL_RANK (or the CPU)."""
    world_size = launched_world_size()
    if world_size <= 1:
        return Dist()
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    cuda = cfg.device != "cpu" and torch.cuda.is_available()
    if cfg.device.startswith("cuda") and not cuda:
        raise ConfigError(f"device: {cfg.device!r} asked for, but CUDA is not available here; use auto or cpu")
    if cuda:
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo", timeout=timedelta(seconds=cfg.collective_timeout),
                            **({"device_id": device} if cuda else {}))
    try:
        store = dist.distributed_c10d._get_default_store()  # the launcher's: outlives a crashed rank
    except (AttributeError, RuntimeError, ValueError):
        store = None
    return Dist(rank=rank, world_size=world_size, local_rank=local_rank, strategy=cfg.strategy, device=device,
                store=store)


def wrap(d: Dist, model: torch.nn.Module, trained: bool = True) -> torch.nn.Module:
    """The model as this strategy trains it. ddp: a full replica per process whose gradients are
    averaged in backward (a frozen model stays as it is); fsdp: FSDP2 `fully_shard` on each decoder
    layer and the whole model, so each process holds 1/world_size of the weights (and of their
    gradients and optimizer state) and gathers a layer's weights only while it runs."""
    if not d.active:
        return model
    if d.strategy == "ddp":
        if not trained:
            return model
        cuda = d.device is not None and d.device.type == "cuda"
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=[d.device.index] if cuda else None)
    from torch.distributed.fsdp import fully_shard  # noqa: PLC0415 - FSDP2, only when asked for
    from transformers.modeling_layers import GradientCheckpointingLayer  # noqa: PLC0415 - decoder layers

    for layer in [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]:
        fully_shard(layer)
    fully_shard(model)
    return model


# --- what non-writer ranks use instead of the run directory --------------------------------------


class NullWriter:
    """A RunWriter that writes nothing: ranks other than 0 (rank 0 writes every rank's rows)."""

    def __init__(self, level: str) -> None:
        self.level = level

    def log(self, table: str, columns: dict) -> None:
        pass

    def maybe_flush(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def truncate_after(self, step: int) -> None:
        pass


class NullStatus:
    """A StatusFile that writes nothing: ranks other than 0."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def update(self, **fields: Any) -> None:
        pass


def rank_log(rank: int) -> logging.Logger:
    """Ranks other than 0 log warnings and errors to stderr only (train.log is rank 0's)."""
    log = logging.getLogger(f"grpo_lab.trainer.rank{rank}")
    log.setLevel(logging.WARNING)
    log.propagate = False
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(f"%(asctime)s rank {rank} %(levelname)s %(message)s"))
        log.addHandler(handler)
    return log


# --- checkpoints ---------------------------------------------------------------------------------


def save_checkpoint(d: Dist, c, folder, step: int, keep: int | checkpoint.Retention | None = None) -> None:
    """One process: checkpoint.save. ddp: rank 0 saves its replica. fsdp: every rank gives its
    shards, rank 0 saves the whole weights and optimizer state in the same files and format, so
    any world size and strategy can resume it."""
    if d.strategy != "fsdp" or not d.active:
        if d.writer:
            checkpoint.save(folder, step, c.models(), c.optimizer, keep)
        return
    from torch.distributed.checkpoint.state_dict import (  # noqa: PLC0415
        StateDictOptions, get_model_state_dict, get_optimizer_state_dict)

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    models = c.models()
    weights = {key: _untied(m, get_model_state_dict(m, options=options)) for key, m in models.items()}
    optim = get_optimizer_state_dict(torch.nn.ModuleDict(models), c.optimizer, options=options)
    if d.writer:
        checkpoint.save(folder, step, weights, _indexed_optimizer_state(optim), keep)


def resume_latest(d: Dist, c, folder) -> int:
    """Restore the newest checkpoint in `folder` on every process; its step (0: none yet).

    Rank 0 reads it and sends it to the others, so only rank 0's machine needs the runs folder.
    ddp: rank 0 loads, then its weights and optimizer state are broadcast; fsdp: rank 0 reads the
    whole state dicts and every rank keeps its shards of them (broadcast_from_rank0)."""
    latest = d.broadcast(checkpoint.latest(folder) if d.writer else None)
    if latest is None:
        return 0
    if not d.active:
        return checkpoint.load(latest, c.models(), c.optimizer)
    if d.strategy == "ddp":
        step = checkpoint.load(latest, c.models(), c.optimizer) if d.writer else 0
        for model in c.models().values():
            d.sync_weights(model)
        state = d.broadcast(_cpu(c.optimizer.state_dict()) if d.writer else None)
        if not d.writer:
            c.optimizer.load_state_dict(state)
        return d.broadcast(step)
    from safetensors.torch import load_file  # noqa: PLC0415
    from torch.distributed.checkpoint.state_dict import (  # noqa: PLC0415
        StateDictOptions, set_model_state_dict, set_optimizer_state_dict)

    # tied weights are stored once (strict off); the other ranks pass empty dicts and receive theirs
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True, strict=False)
    models = c.models()
    for key, model in models.items():
        set_model_state_dict(model, load_file(str(latest / f"{key}.safetensors")) if d.writer else {},
                             options=options)
    if d.broadcast((latest / "optimizer.pt").is_file() if d.writer else None):
        state = torch.load(latest / "optimizer.pt", weights_only=True) if d.writer else None
        set_optimizer_state_dict(torch.nn.ModuleDict(models), c.optimizer,
                                 _named_optimizer_state(state, c.optimizer, models) if d.writer else {},
                                 options=options)
    return d.broadcast(int(read_json(latest / "meta.json")["step"]) if d.writer else None)


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


# --- merging the ranks' pieces of a step (rank 0) ---------------------------------------------------


def _cpu(x: Any) -> Any:
    """Tensors moved to the CPU, through dataclasses, dicts and lists (what gather_object pickles)."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return dataclasses.replace(x, **{f.name: _cpu(getattr(x, f.name)) for f in dataclasses.fields(x) if f.init})
    if isinstance(x, dict):
        return {k: _cpu(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_cpu(v) for v in x]
    return x


def _pad_cat(tensors: list[torch.Tensor], value: Any) -> torch.Tensor:
    """(B_r, T_r) tensors right-padded to the widest, stacked in rank order; (B_r,) ones stacked."""
    if tensors[0].dim() == 1:
        return torch.cat(tensors)
    width = max(t.shape[1] for t in tensors)
    return torch.cat([torch.nn.functional.pad(t, (0, width - t.shape[1]), value=value) for t in tensors])


def _merge_batches(parts: list) -> Any:
    merged = concat_batches(parts, pad_id=0)
    # the ranks sampled side by side: the step waited for the slowest (the logged slowest and mean
    # rank, time/generation_s_max and _mean, come from each rank's timer: MERGE["rank_seconds"])
    rollout = dataclasses.replace(merged.rollout, generation_s=max(p.rollout.generation_s for p in parts))
    # concat_batches pads a narrower rank's per-token figures with NaN, where one process's forward
    # has numbers; the entropy is averaged as (entropy * mask): its padding must be a number
    entropy = torch.where(merged.mask.bool(), merged.entropy, torch.zeros_like(merged.entropy))
    return dataclasses.replace(merged, rollout=rollout, entropy=entropy)


def _merge_stats(parts: list[TokenStats]) -> TokenStats:
    return TokenStats(ratios=[r for p in parts for r in p.ratios], kls=[k for p in parts for k in p.kls],
                      clipped_low=sum(p.clipped_low for p in parts), clipped_high=sum(p.clipped_high for p in parts),
                      tokens=sum(p.tokens for p in parts))


def _merge_last(parts: list[LastPass]) -> LastPass:
    return LastPass(**{f.name: _pad_cat([getattr(p, f.name) for p in parts], False if f.name.startswith("clipped")
                                        else 0.0) for f in dataclasses.fields(LastPass)})


def _mean_per_update(parts: list[list[float]]) -> list[float]:
    """Update i's figure averaged over ranks (each rank scaled its own: see Dist.loss_scale)."""
    return [sum(values) / len(values) for values in zip(*parts)]


MERGE = {
    "batch": _merge_batches,
    "stats": _merge_stats,
    "last": _merge_last,
    "advantages": torch.cat,
    "per_token": lambda parts: {k: _pad_cat([p[k] for p in parts], 0.0) for k in parts[0]},
    "frac_zero_std": lambda parts: sum(parts) / len(parts),  # each rank has the same number of groups
    "policy_losses": _mean_per_update,
    "losses": _mean_per_update,
    # timing.rank_seconds: {phase: [seconds]} per rank -> {phase: [rank 0's, rank 1's, ...]}
    "rank_seconds": lambda parts: {k: [v for p in parts for v in p[k]] for k in parts[0]},
}
