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
  What is gathered, and how rank 0 merges each piece, is step_records.py's; this module only moves
  picklable objects (Dist.gather_object, Dist.broadcast). Checkpoints of sharded or replicated models:
  checkpoint.save_checkpoint and checkpoint.resume_latest.
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

from grpo_lab.trainer.config import Config, ConfigError, launched_world_size
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

    # --- moving objects between ranks ---------------------------------------------------------------

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


# --- what travels between ranks -----------------------------------------------------------------


def on_cpu(x: Any) -> Any:
    """Tensors moved to the CPU, through dataclasses, dicts and lists (what gather_object pickles)."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return dataclasses.replace(x, **{f.name: on_cpu(getattr(x, f.name)) for f in dataclasses.fields(x) if f.init})
    if isinstance(x, dict):
        return {k: on_cpu(v) for k, v in x.items()}
    if isinstance(x, list):
        return [on_cpu(v) for v in x]
    return x
