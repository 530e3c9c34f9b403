"""A tracker's log as a run directory: TensorBoard event files, a wandb offline run, a trackio run.

What a tracker keeps is each step's scalars (and, for wandb and trackio, the completions tables a run
logged): the run gets tables/scalars (`time` the tracker's time of the step), tables/samples from the
completions tables where there are any, and config.json. Names: a run this lab reported keeps its own;
verl's and OpenRLHF's are mapped by tracker_names.py (verl's `rollout_corr/k3_kl` becomes `mismatch/kl`,
shown in Live's "Sampler vs trainer"), others keep their names. `wall_s`, where the tracker has it (a run
this lab reported), is the run's own; else it counts from the first step's time.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa

from grpo_lab.rundir.importers import samples, tracker_names
from grpo_lab.rundir.importers.build import SourceError, finish, open_writer, scalar_row
from grpo_lab.rundir.layout import RunPaths
from grpo_lab.rundir.trackers.logged import Logged

KINDS = ("tensorboard", "wandb", "trackio")


def read(kind: str, source: Path, run: str | None) -> Logged:
    """The tracker's log at `source` (trackio: its store folder, and `run` as PROJECT/RUN)."""
    try:
        if kind == "tensorboard":
            from grpo_lab.rundir.trackers import tensorboard_files  # noqa: PLC0415

            logged = tensorboard_files.read(source)
        elif kind == "wandb":
            from grpo_lab.rundir.trackers import wandb_files  # noqa: PLC0415

            logged = wandb_files.read(source)
        else:
            from grpo_lab.rundir.trackers import trackio_store  # noqa: PLC0415

            project, slash, name = (run or "").partition("/")
            if not (project and slash and name):
                raise SourceError(f"--run {run!r}: trackio needs PROJECT/RUN (trackio's project and run names)")
            logged = trackio_store.read(project, name, source)
    except ImportError as exc:
        raise SourceError(f"{kind}: needs the {exc.name or kind} package (pip install -r requirements-trackers.txt)"
                          ) from None
    except (FileNotFoundError, ValueError) as exc:
        raise SourceError(f"{source}: {exc}") from None
    if not logged.scalars:
        raise SourceError(f"{source}: expected {kind} scalars logged at steps; found none")
    return logged


def looks_like(source: Path) -> str | None:
    """Which tracker's files `source` holds: tensorboard (event files), wandb (an offline run), trackio (a store)."""
    if next(source.glob("events.out.tfevents.*"), None) is not None:
        return "tensorboard"
    if next(source.glob("run-*.wandb"), None) is not None or next(source.glob("offline-run-*/run-*.wandb"), None):
        return "wandb"
    if next(source.glob("*.db"), None) is not None:
        return "trackio"
    return None


def scalars_by_step(kind: str, source: Path) -> dict[int, dict[str, float]]:
    """A tracker's scalars under our names, by step, to join to a rollout dump's (verl's --tensorboard)."""
    logged = read(kind, source, None)
    framework = tracker_names.framework({n for values in logged.scalars.values() for n in values})
    return {step: {tracker_names.ours(n, framework): v for n, v in values.items()}
            for step, values in logged.scalars.items()}


def convert(logged: Logged, paths: RunPaths, *, name: str, kind: str, source: Path) -> None:
    steps = sorted(logged.scalars)
    framework = tracker_names.framework({n for values in logged.scalars.values() for n in values})
    times = [logged.times[s] for s in steps if s in logged.times]
    start = min(times) if times else None
    writer = open_writer(paths)
    for step in steps:
        values = {tracker_names.ours(n, framework): v for n, v in logged.scalars[step].items()}
        wall = values.pop("wall_s", None)
        row = scalar_row(step, logged.times.get(step), start, values)
        if wall is not None:  # the run's own, as it logged it
            row["wall_s"] = pa.array([wall], pa.float64())
        writer.log("scalars", row)
        if step in logged.tables and logged.tables[step]:
            writer.log("samples", sample_columns(step, logged.tables[step]))
    writer.close()
    config = run_config(logged.config, framework, name=name, kind=kind, source=source, steps=steps)
    finish(paths, config, step=steps[-1], total_steps=int(config.get("max_steps") or steps[-1]),
           started_at=start, updated_at=max(times) if times else None)


def sample_columns(step: int, rows: list[dict[str, Any]]) -> dict:
    """A completions table's rows (trackers.TABLE_COLUMNS and rewards/<fn>) as tables/samples columns."""
    need = ("prompt", "completion")
    if any(k not in rows[0] for k in need):
        raise SourceError(f"step {step}: a completions table needs {', '.join(need)} columns; has {sorted(rows[0])}")
    get = lambda key, default=None: [r.get(key, default) for r in rows]  # noqa: E731
    per_fn = {k.removeprefix("rewards/"): get(k) for k in rows[0] if k.startswith("rewards/")}
    out = samples.columns(step=step, group=[int(g) for g in get("group", 0)],
                          sample_idx=[int(i) for i in get("sample_idx", 0)], prompt=[str(p) for p in get("prompt")],
                          completion=[str(c) for c in get("completion")], reward=get("reward"),
                          advantage=[math.nan if a is None else a for a in get("advantage", math.nan)], per_fn=per_fn)
    if "prompt_id" in rows[0]:  # the run's own ids (a dataset's); else the hash of the prompt, as imports name them
        out["prompt_id"] = pa.array([str(p) for p in get("prompt_id")], pa.string())
    return out


def run_config(logged: dict[str, Any] | None, framework: str, *, name: str, kind: str, source: Path,
               steps: list[int]) -> dict[str, Any]:
    """config.json: a lab run's own config as the tracker kept it, else what the import knows."""
    base = dict(logged) if framework == "grpo-lab" and logged else {
        "algo": "grpo", "model": "unknown", "task": f"{framework} {kind} log", "rewards": {},
        "max_steps": steps[-1], "token_detail_groups": 0}
    base.pop("sources", None)
    return {**base, "name": name, "source": kind if framework == "grpo-lab" else f"{framework}-{kind}",
            "imported_from": str(source.resolve()), "tracker": kind}
