"""More seeds of runs already made: the same options, new seeds, through the launch queue.

Compare says that runs of one seed each cannot be compared yet; its "Add 2 seeds to each" calls `add`.
A run's config.json is read back as input (the runs folder may be shared, edited or unpacked from
elsewhere): only the trainer's options are kept, and every new run goes through the launch form's checks
(form_checks.checked_config) before any is queued, then is queued or started as the form's would be
(launcher.launch: queued while max_runs() train). A new run differs from its run in seed and name only,
so Compare groups them into one variant (rundir/variants.variant_key).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_lab.launching import form_checks, form_fields, launcher, pending_launches
from grpo_lab.rundir.reader import read_run

NOT_COPIED = ("name", "runs_dir", "resume", "seed")  # the new run's own; the rest is its run's


@dataclass(frozen=True)
class NewRun:
    name: str
    seed: int
    of: str  # the run whose options it takes
    values: dict[str, Any]  # the launch values: the run's options, this seed and name


def new_seeds(used: set[int], n: int) -> list[int]:
    """`n` seeds that no run of the variant used, the smallest first.

    >>> new_seeds({0}, 2), new_seeds({1, 2}, 2), new_seeds(set(), 1)
    ([1, 2], [0, 3], [0])
    """
    out, seed = [], 0
    while len(out) < n:
        if seed not in used:
            out.append(seed)
        seed += 1
    return out


def launch_values(config: dict[str, Any], fields: set[str]) -> dict[str, Any]:
    """A run's config.json as launch values: the trainer's options only (`fields`), mappings of
    mappings (reward_params) as the JSON the command line reads.

    >>> launch_values({"name": "a", "seed": 0, "beta": 0.0, "reward_params": {"length": {"max_len": 8}},
    ...                "sources": {}}, {"name", "seed", "beta", "reward_params"})
    {'beta': 0.0, 'reward_params': '{"length": {"max_len": 8}}'}
    """
    from grpo_lab.trainer.config import JSON_MAPPINGS  # noqa: PLC0415 - the trainer's parser: only when asked

    return {k: json.dumps(v) if k in JSON_MAPPINGS and isinstance(v, dict) else v
            for k, v in config.items() if k in fields and k not in NOT_COPIED}


def waiting_seeds(runs_dir: Path, first: str) -> set[int]:
    """Seeds of the launches added for `first` that have no run folder yet (queued or starting): what
    an earlier `add` asked for, read from the names it gave them."""
    named = re.compile(rf"{re.escape(first)}-s(\d+)(?:-\d+)?")
    return {int(m.group(1)) for p in pending_launches.pending(runs_dir) if not p.refused and (m := named.fullmatch(p.name))}


def plan(runs_dir: Path, variants: list[list[str]], n: int) -> list[NewRun]:
    """`n` new runs for each variant (its runs' names, the first one's options taken): seeds none of
    them used, named `<first>-s<seed>` (or the next free name). Raises LaunchError naming the run
    when one has no readable config."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 16:
        raise form_checks.LaunchError(f"seeds: must be a whole number in [1, 16], got {n!r}")
    fields = set(form_fields.config_fields())
    out: list[NewRun] = []
    for names in variants:
        configs = [read_run(runs_dir, name).config for name in names]
        if not configs or not isinstance(configs[0], dict):
            raise form_checks.LaunchError(f"{names[0] if names else '?'}: no readable config.json to take options from")
        used = {c.get("seed") for c in configs if isinstance(c, dict) and isinstance(c.get("seed"), int)}
        used |= waiting_seeds(runs_dir, names[0])  # asked for already: not asked again
        for seed in new_seeds(used, n):
            name = launcher.free_name(runs_dir, f"{names[0]}-s{seed}")
            out.append(NewRun(name=name, seed=seed, of=names[0],
                              values={**launch_values(configs[0], fields), "name": name, "seed": seed}))
    return out


def add(runs_dir: Path, variants: list[list[str]], n: int) -> list[tuple[NewRun, bool]]:
    """Plan, check every new run (nothing queued when one is refused: LaunchError, one line naming the
    run), then queue or start each; returns (run, queued) in order (queued False: started now)."""
    runs_dir = Path(runs_dir)
    planned = plan(runs_dir, variants, n)
    for run in planned:
        try:
            form_checks.checked_config({k: v for k, v in run.values.items() if v is not None and v != ""}, runs_dir)
        except (form_checks.LaunchError, ValueError) as exc:
            raise form_checks.LaunchError(f"{run.of}: {exc}") from None
    return [(run, launcher.launch(run.values, runs_dir)[1] == 0) for run in planned]
