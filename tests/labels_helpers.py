"""A run directory with a samples table written by the real writer, for the ratings tests."""

from __future__ import annotations

import json
from pathlib import Path

from grpo_lab.rundir.layout import RunPaths
from grpo_lab.rundir.writer import RunWriter


def fake_run(root: Path, name: str = "rated", steps: int = 2, groups: int = 2, G: int = 4,
             completion=lambda step, group, i: "x" * (i + 1), state: str = "finished") -> Path:
    """steps x groups x G completions, completion(step, group, i) the text of each."""
    run = Path(root) / name
    run.mkdir(parents=True)
    writer = RunWriter(RunPaths(run), flush_seconds=0)
    for step in range(1, steps + 1):
        rows = [(g, i) for g in range(groups) for i in range(G)]
        writer.log("samples", {
            "step": [step] * len(rows), "group": [g for g, _ in rows], "sample_idx": [i for _, i in rows],
            "prompt_id": [f"{g}+{step}" for g, _ in rows], "prompt": [f"{g}+{step}=" for g, _ in rows],
            "completion": [completion(step, g, i) for g, i in rows], "reward": [0.0] * len(rows),
            "advantage": [0.0] * len(rows)})
    writer.close()
    (run / "status.json").write_text(json.dumps({"state": state, "step": steps, "total_steps": steps,
                                                 "name": name, "algo": "grpo"}))
    (run / "config.json").write_text(json.dumps({"name": name, "algo": "grpo", "group_size": G, "model": "tiny",
                                                 "max_steps": steps}))
    return run
