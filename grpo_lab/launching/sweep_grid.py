"""A sweep's plan: the seeds, the grid and the runs they make, before anything is checked or queued.

Pure planning, below both the dashboard's launch form and the `grpo-lab-sweep` command (grpo_lab/launching/sweep.py),
which both import it; queueing the planned runs is grpo_lab/launching/sweep_queue.py.
Every bound is checked on the numbers before a list is built: `--seeds 1000000000` is refused in one
line at once, never after a billion seeds were made.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from dataclasses import dataclass
from typing import Any

MAX_SWEEP_RUNS = 64  # a grid larger than this is almost always a typo (one more value, one more key)
# Options a sweep sets per run (or that name the sweep itself): never part of the base nor the grid.
PER_RUN = ("name", "runs_dir", "resume", "seed", "sweep", "variant")
ENDED = ("finished", "failed", "stopped")


class SweepError(ValueError):
    """A sweep refused before anything was queued; the message is one line."""


@dataclass
class PlannedRun:
    name: str
    variant: str
    seed: int
    values: dict[str, Any]  # the trainer options of this run, as launcher.launch takes them


def seeds_of(seeds: int | None, seed_list: str | None) -> list[int]:
    """The seeds to run; more than MAX_SWEEP_RUNS is refused before any list is made.

    >>> seeds_of(3, None), seeds_of(None, "3, 7,11"), seeds_of(None, None)
    ([0, 1, 2], [3, 7, 11], [0])
    """
    if seeds is not None and seed_list is not None:
        raise SweepError("seeds: give --seeds or --seed-list, not both")
    if seed_list is not None:
        items = [s for s in seed_list.split(",") if s.strip()]
        if len(items) > MAX_SWEEP_RUNS:
            raise SweepError(f"seed-list: at most {MAX_SWEEP_RUNS} seeds (a sweep's limit), got {len(items)}")
        try:
            out = [int(s) for s in items if len(s.strip()) <= 20]  # a seed is a 64-bit number at most
        except ValueError:
            raise SweepError(f"seed-list: must be whole numbers separated by commas, got {seed_list[:80]!r}") from None
        if not out or len(out) != len(items) or len(set(out)) != len(out):
            raise SweepError(f"seed-list: must list at least one seed of at most 20 digits, each once, got "
                             f"{seed_list[:80]!r}")
        return out
    if seeds is not None and seeds < 1:
        raise SweepError(f"seeds: must be >= 1, got {seeds}")
    if seeds is not None and seeds > MAX_SWEEP_RUNS:
        raise SweepError(f"seeds: a sweep may have at most {MAX_SWEEP_RUNS} runs, got --seeds {seeds}")
    return list(range(seeds if seeds is not None else 1))


def parse_grid(items: list[str]) -> list[tuple[str, list[str]]]:
    """`--grid` items as (option, values), keys in the trainer's spelling; refused with one line
    for a key the trainer does not have, one a sweep sets itself, or a mapping option.

    >>> parse_grid(["beta=0,0.04", "max-steps=5"])
    [('beta', ['0', '0.04']), ('max_steps', ['5'])]
    """
    from grpo_lab.trainer.config import Config

    fields = {f.name: f for f in dataclasses.fields(Config)}
    grid, seen = [], set()
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        values = [v.strip() for v in text.split(",") if v.strip()]
        if not sep or not values:
            raise SweepError(f"grid: write KEY=V1,V2, got {item[:80]!r}")
        if key not in fields:
            raise SweepError(f"grid: {key[:40]}: unknown option; see python -m grpo_lab.trainer --help")
        if key in PER_RUN:
            hint = "; use --seeds or --seed-list for seeds" if key == "seed" else ", it cannot be swept"
            raise SweepError(f"grid: {key}: set per run by the sweep{hint}")
        if fields[key].type in (dict, "dict"):  # its values hold commas themselves (correctness=1,length=0.1)
            raise SweepError(f"grid: {key}: a mapping option cannot be swept from the command line; "
                             "set it once for all runs (--rewards, --config), or run one sweep per value")
        if key in seen:
            raise SweepError(f"grid: {key}: given twice; list all its values in one --grid")
        if len(values) > MAX_SWEEP_RUNS:
            raise SweepError(f"grid: {key}: at most {MAX_SWEEP_RUNS} values (a sweep's limit), got {len(values)}")
        if len(set(values)) != len(values):
            raise SweepError(f"grid: {key}: a value is listed twice in {item[:80]!r}")
        seen.add(key)
        grid.append((key, values))
    return grid


def run_name(sweep: str, variant: str, seed: int) -> str:
    """NAME-VARIANT-sSEED made a valid run name (letters, digits, '.', '_', '-'; at most 100).

    >>> run_name("s", "beta=0.04", 0), run_name("s", "beta=0,epsilon=0.2", 11)
    ('s-beta_0.04-s0', 's-beta_0_epsilon_0.2-s11')
    """
    text = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{sweep}-{variant}").replace("..", "_")
    tail = f"-s{seed}"
    return text[: 100 - len(tail)] + tail


def plan(name: str, base: dict[str, Any], grid: list[tuple[str, list[str]]], seeds: list[int]) -> list[PlannedRun]:
    """Every run of the sweep: each grid point (the cross product) with each seed. The count is
    multiplied out before the product is built."""
    from grpo_lab.rundir.reader import RunNameError, check_name

    try:
        check_name(name)
    except RunNameError:
        raise SweepError(f"name: must be letters, digits, '.', '_', '-', starting with a letter or digit, "
                         f"got {name[:80]!r}") from None
    keys = [k for k, _ in grid]
    points = math.prod(len(values) for _, values in grid)
    if points * len(seeds) > MAX_SWEEP_RUNS:
        raise SweepError(f"grid: {points} grid points x {len(seeds)} seeds = {points * len(seeds)} runs; "
                         f"a sweep may have at most {MAX_SWEEP_RUNS}")
    runs = []
    for point in itertools.product(*(values for _, values in grid)):
        variant = ",".join(f"{k}={v}" for k, v in zip(keys, point)) or "base"
        for seed in seeds:
            run = run_name(name, variant, seed)
            values = {**base, **dict(zip(keys, point)), "seed": seed, "sweep": name, "variant": variant, "name": run}
            runs.append(PlannedRun(name=run, variant=variant, seed=seed, values=values))
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise SweepError("grid: two runs would get the same name after shortening; use a shorter sweep name")
    return runs
