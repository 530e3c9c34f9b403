"""Runs the prompt-history and Compare-completions tests read: a samples table written with worked
numbers, and a verl rollout dump of a native run's own prompts, imported (an imported run whose
prompts match the native one's, each drawn on every step)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from grpo_lab.rundir.layout import RunPaths
from grpo_lab.rundir.writer import TableWriter

NAN = float("nan")
# prompt_id: {step: rewards of its group}; one group per prompt per step, groups numbered in this order
WORKED = {
    "up": {1: [0, 0, 0, 1], 2: [0, NAN, 1, 0], 3: [1, 1, 0, 1], 4: [1, 1, 1, 1]},  # 0.25 0.25 | 0.75 1
    "down": {1: [1, 1, 1, 0], 3: [0, 0, 0, 0]},  # 0.75 | 0
    "never": {1: [0, 0, 0, 0], 2: [0, 0.25, 0, 0]},  # rewarded, never passing 0.5
    "always": {2: [1, 1, 1, 1], 4: [1, 1, 1, 1]},  # no spread, no signal
    "once": {3: [1, 0, 0, 0]},
}
VERL_SCORES = {0: [0, 0, 0, 0], 1: [0, 1, 0, 0], 2: [1, 1, 1, 0]}  # per step: the first prompt learned


def write_worked(run_dir: Path, v2: bool = True) -> None:
    """WORKED as tables/samples, one part per step, advantages (r - mean) / std as std_mode group
    gives them (0 where the std is 0; an unscored completion gets 0)."""
    writer = TableWriter(RunPaths(run_dir).table("samples"), 1000)
    for step in sorted({s for draws in WORKED.values() for s in draws}):
        cols = {k: [] for k in ("step", "group", "prompt_id", "sample_idx", "prompt", "completion", "reward",
                                "advantage")}
        for g, (pid, rewards) in enumerate((p, d[step]) for p, d in WORKED.items() if step in d):
            scored = [r for r in rewards if r == r]
            mean = sum(scored) / len(scored)
            std = (sum((r - mean) ** 2 for r in scored) / len(scored)) ** 0.5
            for i, r in enumerate(rewards):
                values = (step, g, pid, i, f"user: What is {pid}?", f"{pid} answer {i}", r,
                          (r - mean) / std if std and r == r else 0.0)
                for k, v in zip(cols, values):
                    cols[k].append(v)
        writer.append(cols if v2 else {k: v for k, v in cols.items() if k != "group"})
        writer.flush()


def import_verl_of(samples, runs: Path, name: str, prompts: int = 2, steps: int = 3) -> list[str]:
    """A verl dump (verl's own fields) of the first `prompts` prompts of a native run's samples, each
    drawn on steps 1..steps with G answers scored by VERL_SCORES (the first prompt climbs from 0 to
    3/4, the others stay at their score), imported as `runs/name`; returns the prompts' texts."""
    texts = list(dict.fromkeys(samples["prompt"]))[:prompts]
    dump = runs.parent / f"{name}-dump"
    dump.mkdir(parents=True)
    for step in range(1, steps + 1):
        rows = [{"input": text, "output": f"verl says {p}{step}{k}", "score": float(VERL_SCORES[step - 1][k] if p == 0
                                                                                  else p % 2),
                 "step": step, "uid": f"{step}-{p}"}
                for p, text in enumerate(texts) for k in range(4)]
        (dump / f"{step}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    cli = importlib.import_module("grpo_lab.rundir.import")
    assert cli.main([str(dump), "--name", name, "--runs-dir", str(runs)]) == 0
    return texts
