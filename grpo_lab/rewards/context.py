"""Where the completions a reward is scoring sit in the run: run directory, step, group, sample index.

TRL's call has no place for this (its `trainer_state` knows the step, not the run directory nor the
groups), and a new keyword would collide with any dataset column of that name. So the trainer sets a
context variable around the step's scoring, and a reward that needs it (`human`) reads `current()`;
outside it (the dry run, evaluation, TRL, a notebook) `current()` is None and such a reward says so.

Completion i of the call answers group `group_of(i, group_size)`, as sample `i % group_size`
(docs/run-directory.md, tables/samples: the same `group` and `sample_idx` the step's rows get).
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from grpo_lab.objective.options import group_of


@dataclass(frozen=True)
class StepSamples:
    run_dir: Path
    step: int
    group_size: int
    prompt_ids: list[str]  # one per group
    prompts: list[str]  # one per group: the prompt as the model saw it (chat template applied)
    # whether the run was asked to stop before this call (a stop during sampling): a waiting reward ends at once
    stop_requested: Callable[[], bool] = field(default=lambda: False, compare=False, repr=False)

    def key(self, i: int) -> tuple[int, int]:
        """(group, sample_idx) of completion i."""
        return group_of(i, self.group_size), i % self.group_size


_current: ContextVar[StepSamples | None] = ContextVar("grpo_lab_step_samples", default=None)


def current() -> StepSamples | None:
    return _current.get()


@contextlib.contextmanager
def scoring(samples: StepSamples | None) -> Iterator[None]:
    """Make `samples` current while the block scores them (None: no context, e.g. dynamic sampling,
    whose later rounds number their groups only once the step is over)."""
    token = _current.set(samples)
    try:
        yield
    finally:
        _current.reset(token)


def of_step(c, rows: list[dict], step: int) -> StepSamples | None:
    """The context for a step's first (only) sampling round on one process; None where the groups
    of this call are not the step's groups as logged (dynamic sampling, several processes)."""
    cfg = c.cfg
    if cfg.dynamic_sampling or getattr(c.dist, "active", False) or step < 1:
        return None
    return StepSamples(run_dir=Path(cfg.run_dir), step=step, group_size=cfg.group_size,
                       prompt_ids=[str(r.get("prompt_id", "")) for r in rows],
                       prompts=[str(r.get("prompt", "")) for r in rows], stop_requested=c.stop_requested)
