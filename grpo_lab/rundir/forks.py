"""Forks: which steps of a run can be forked, and which run a run was forked from.

A fork (`grpo-lab-train --fork-from runs/NAME --fork-step S`, grpo_lab/trainer/fork.py) starts a new run
from checkpoint S of another. Its config.json records the parent as `fork_from` (the folder or name it
was given) and the step as `fork_step`; the child's tables hold its own steps only (S+1 on), so a
reader draws the shared history from the parent's (Compare, Runs' family).

A step can be forked when its checkpoint is whole: checkpoints/step-NNNNNNNN/ with the weights, the
optimizer and the random state (the trainer builds each under a temporary name and renames it into
place, so a listed one is whole even while its run is training), and the run's checkpoints/initial/
(the policy as RL started: the fork's frozen reference) is there too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

STEP_DIR = re.compile(r"^step-(\d{8})$")
WHOLE = ("meta.json", "model.safetensors", "optimizer.pt", "rng.pt")  # what a fork reads of a checkpoint
INITIAL = "initial"


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    """Where a run keeps its checkpoint of `step`.

    >>> checkpoint_dir(Path("runs/a"), 12).as_posix()
    'runs/a/checkpoints/step-00000012'
    """
    return run_dir / "checkpoints" / f"step-{step:08d}"


def forkable_steps(run_dir: Path) -> list[int]:
    """The steps of `run_dir` a fork can start from, ascending ([] without its initial checkpoint)."""
    folder = run_dir / "checkpoints"
    if not (folder / INITIAL / "model.safetensors").is_file():
        return []
    try:
        names = [p.name for p in folder.iterdir()]
    except OSError:
        return []
    steps = [int(m.group(1)) for n in names if (m := STEP_DIR.match(n))]
    return sorted(s for s in steps if all((checkpoint_dir(run_dir, s) / f).is_file() for f in WHOLE))


def fork_of(config: dict[str, Any] | None) -> tuple[str, int] | None:
    """(parent run's name, fork step) from a config.json, or None for a run that is not a fork.

    >>> fork_of({"fork_from": "runs/demo", "fork_step": 20})
    ('demo', 20)
    >>> fork_of({"fork_from": "", "fork_step": 0}) is None, fork_of(None) is None
    (True, True)
    """
    if not isinstance(config, dict):
        return None
    parent, step = config.get("fork_from"), config.get("fork_step")
    if not isinstance(parent, str) or not parent.strip() or isinstance(step, bool) or not isinstance(step, int):
        return None
    return Path(parent.rstrip("/")).name, step


def children(configs: Iterable[tuple[str, dict[str, Any] | None]]) -> dict[str, list[tuple[str, int]]]:
    """parent name -> [(child name, fork step), ...] by step, from (run name, config) pairs.

    >>> children([("a", {}), ("b", {"fork_from": "a", "fork_step": 4}), ("c", {"fork_from": "a", "fork_step": 2})])
    {'a': [('c', 2), ('b', 4)]}
    """
    out: dict[str, list[tuple[str, int]]] = {}
    for name, config in configs:
        if (fork := fork_of(config)) is not None:
            out.setdefault(fork[0], []).append((name, fork[1]))
    return {parent: sorted(kids, key=lambda kid: (kid[1], kid[0])) for parent, kids in out.items()}


def lineage(name: str, parents: dict[str, tuple[str, int]], limit: int = 32) -> list[tuple[str, int]]:
    """The ancestors of run `name`, nearest first, as (run, step the line left it at); stops at a loop.

    >>> lineage("c", {"c": ("b", 6), "b": ("a", 3)})
    [('b', 6), ('a', 3)]
    """
    out, seen = [], {name}
    while name in parents and len(out) < limit:
        parent, step = parents[name]
        if parent in seen:
            break
        out.append((parent, step))
        seen.add(parent)
        name = parent
    return out


def joined(own, parent, step: int, clock: tuple[str, ...] = ("wall_s",)):
    """A fork's scalars (pandas) preceded by its parent's up to the fork step, so its line leaves the
    parent's curve at `step` (read from the parent: a fork's tables hold its own steps only). Its
    `clock` columns continue from the parent's value at `step`.

    >>> import pandas as pd
    >>> parent = pd.DataFrame({"step": [1, 2, 3], "wall_s": [1.0, 2.0, 3.0], "reward/mean": [0.1, 0.2, 0.3]})
    >>> child = pd.DataFrame({"step": [3, 4], "wall_s": [0.5, 1.5], "reward/mean": [0.5, 0.6]})
    >>> joined(child, parent, 2).values.tolist()
    [[1.0, 1.0, 0.1], [2.0, 2.0, 0.2], [3.0, 2.5, 0.5], [4.0, 3.5, 0.6]]
    """
    import pandas as pd  # noqa: PLC0415 - the trainer reads this module without pandas' import time

    before = parent[parent["step"] <= step]
    if before.empty:
        return own
    own = own.copy()
    for column in clock:
        if column in own and column in before and before[column].notna().any():
            own[column] = own[column] + float(before[column].dropna().iloc[-1])
    return pd.concat([before, own], ignore_index=True)
