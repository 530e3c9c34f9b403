"""Where a step's time goes: seconds per phase, and tokens per second where tokens are counted.

`with c.timer.phase("generation"): ...` adds to the phase; `scalars()` returns one row's figures
and starts the next. Logging that happens after a step's row is built (flushing part files) is
counted in the next step's `time/log_s`. Every phase is always present (0 when skipped), so the
columns never come and go.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

PHASES = ("generation", "reward", "old_logp", "ref", "update", "log")


class PhaseTimer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self.tokens: dict[str, int] = {"generation": 0, "update": 0}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - start

    def count(self, phase: str, tokens: int) -> None:
        """Tokens processed by `phase` (generation: completion tokens sampled; update: tokens
        through a forward and backward pass, every pass)."""
        self.tokens[phase] += int(tokens)

    def scalars(self) -> dict[str, float]:
        out = {f"time/{name}_s": s for name, s in self.seconds.items()}
        for phase, n in self.tokens.items():
            seconds = self.seconds[phase]
            out[f"perf/{phase}_tokens_per_s"] = n / seconds if seconds > 0 else 0.0
        self.__init__()
        return out
