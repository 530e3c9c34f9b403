"""Where a step's time goes: seconds per phase, and tokens per second where tokens are counted.

`with c.timer.phase("generation"): ...` adds to the phase; `scalars()` returns one row's figures
and starts the next. Logging that happens after a step's row is built (flushing part files) is
counted in the next step's `time/log_s`. Every phase is always present (0 when skipped), so the
columns never come and go.

On CUDA the host runs ahead of the device: a phase's clock would stop when its kernels are queued,
and its work would be timed in whichever later phase waits for it (pi_old's forward in the reward
phase, say). So on CUDA each phase edge, and each row's end, first synchronises the device
(`GpuPerf.synchronize`): time/* is what the card did, and perf/*_tokens_per_s and perf/mfu with it.
A synchronise drains the queue, so the host no longer queues the next phase's kernels while the
last ones run: 2 x (5 + passes x minibatches) edges a step, each costing about the launch latency of
the next phase's first kernels (estimated at tens of microseconds, next to steps of 0.1-3 s; not yet
measured on a card: bench/gpu_vs_trl.py times it). A CPU run calls nothing.

Several processes: these are rank 0's figures. For the phases where one process can hold up the
others, each rank also sends its seconds (`rank_seconds`) with the step's gather to rank 0
(records.step_scalars), which logs the slowest and the mean rank (`rank_scalars`): the stragglers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from grpo_lab.rundir.metrics import PHASES, RANK_PHASES, named  # the registry's: the scalars they become live there


class PhaseTimer:
    def __init__(self, gpu=None, sync: Callable[[], None] | None = None) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self.tokens: dict[str, int] = {"generation": 0, "update": 0}
        self.gpu = gpu  # perf.GpuPerf on a CUDA device: perf/mfu and perf/gpu_memory_gb too
        self.sync = sync  # waits for the device's queued work; default: the gpu's synchronize (none on a CPU)
        self.started = self._now()

    def _now(self) -> float:
        """The host clock, once the device has done what was queued before (CUDA only)."""
        sync = self.sync or getattr(self.gpu, "synchronize", None)
        if sync is not None:
            sync()
        return time.perf_counter()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = self._now()
        try:
            yield
        finally:
            self.seconds[name] += self._now() - start

    def count(self, phase: str, tokens: int) -> None:
        """Tokens processed by `phase` (generation: completion tokens sampled; update: tokens
        through a forward and backward pass, every pass)."""
        self.tokens[phase] += int(tokens)

    def scalars(self) -> dict[str, float]:
        out = {named(f"time/{name}_s"): s for name, s in self.seconds.items()}
        for phase, n in self.tokens.items():
            seconds = self.seconds[phase]
            out[named(f"perf/{phase}_tokens_per_s")] = n / seconds if seconds > 0 else 0.0
        if self.gpu is not None:
            out.update(self.gpu.scalars(self.tokens["generation"], self.tokens["update"], self._now() - self.started))
        self.__init__(self.gpu, self.sync)
        return out


def rank_seconds(timer: PhaseTimer) -> dict[str, list[float]]:
    """This rank's seconds so far this step in each of RANK_PHASES, as one-element lists: the piece
    step_records.ScalarPieces merges in rank order (its step's generation and update are done by then)."""
    return {phase: [timer.seconds[phase]] for phase in RANK_PHASES}


def rank_scalars(seconds: dict[str, list[float]]) -> dict[str, float]:
    """time/<phase>_s_max (the slowest rank) and time/<phase>_s_mean (the mean over ranks) of every
    rank's seconds, {phase: [rank 0's, rank 1's, ...]}."""
    out: dict[str, float] = {}
    for phase, values in seconds.items():
        out[named(f"time/{phase}_s_max")] = max(values)
        out[named(f"time/{phase}_s_mean")] = sum(values) / len(values)
    return out
