"""Sweep runs written with the run-directory writer (no trainer): what the variants pages read."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from grpo_lab.rundir.layout import RunPaths, write_json_atomic
from grpo_lab.rundir.writer import RunWriter
from grpo_lab.trainer.config import Config


def write_run(root: Path, name: str, sweep: str, variant: str, seed: int, level: float, steps: int = 12) -> None:
    """A finished run of `steps` steps whose reward climbs to about `level` (noise 0.01 from `seed`)."""
    paths = RunPaths(root / name)
    paths.root.mkdir(parents=True)
    cfg = Config(name=name, runs_dir=str(root), seed=seed, sweep=sweep, variant=variant, max_steps=steps)
    write_json_atomic(paths.config, cfg.run_record())
    write_json_atomic(paths.status, {"state": "finished", "step": steps, "total_steps": steps, "name": name,
                                     "started_at": 1.7e9 + seed, "updated_at": 1.7e9 + 100})
    rng = np.random.default_rng(seed)
    x = np.arange(1, steps + 1)
    writer = RunWriter(paths, level="scalars", flush_seconds=0)
    writer.log("scalars", {
        "step": x.tolist(), "time": (1.7e9 + x).tolist(), "wall_s": (x * 2.0).tolist(),
        "reward/mean": (level * x / steps + rng.normal(0, 0.01, steps)).tolist(),
        "kl/mean": (0.01 * x).tolist(), "completion/length_mean": [3.0] * steps, "time/step_s": [2.0] * steps})
    writer.close()


def write_sweep(root: Path, sweep: str, levels: dict[str, float], seeds: int, steps: int = 12) -> None:
    """`seeds` runs of each variant (label -> reward level), named as grpo-lab-sweep names them."""
    for label, level in levels.items():
        for seed in range(seeds):
            write_run(root, f"{sweep}-{label.replace('=', '_')}-s{seed}", sweep, label, seed, level, steps)
