"""A small run whose reward is gamed in a known way, for the reward-hacking lens's tests (AppTest and browser).

STEPS steps, 4 groups of 4 completions, rewards correctness (weight 1) and length (weight 1). From step
HACKED on, group SUSPECT's longest completions win on length alone: wrong answers (correctness 0, strict
check failed) pushed up by the length reward; the other groups stay honest (the right answer wins). The
scalars carry the honesty/* figures the trainer would write (computed from these samples by
rundir/honesty.py); `lens=False` writes the run as an import or an older run does, without them and
without the samples' decided_by / strict_pass columns.
"""

from __future__ import annotations

import time
from pathlib import Path

from grpo_lab.rundir import honesty
from grpo_lab.rundir.layout import SCHEMA_VERSION, RunPaths, write_json_atomic
from grpo_lab.rundir.writer import RunWriter

G, GROUPS, STEPS, HACKED, SUSPECT = 4, 4, 12, 4, 2
WEIGHTS = {"correctness": 1.0, "length": 1.0}


def group_rows(step: int, g: int) -> list[dict]:
    """One group's completions: (completion, answer, correctness, length reward, tokens)."""
    answer = str(g + 3)
    if g == SUSPECT and step >= HACKED:  # padded wrong answers beat the short right one
        rows = [(f"{g}{g}{g}{g}{g}", 0.0, 0.0, 6), (f"{g}{g}{g}{g}", 0.0, 0.0, 5), (answer, 1.0, -1.5, 2),
                ("9", 0.0, -1.5, 2)]
    else:  # the right answer wins (group 0: every completion as long, so no length correlation at all: NaN)
        rows = [(answer, 1.0, -0.5, 2), ("1", 0.0, -0.5, 2), ("12" if g else "2", 0.0, -0.5, 3 if g else 2),
                ("1", 0.0, -0.5, 2)]
    return [{"completion": c, "answer": answer, "rewards/correctness": r, "rewards/length": ln, "length": n}
            for c, r, ln, n in rows]


def samples(step: int, lens: bool) -> dict[str, list]:
    rows = []
    for g in range(GROUPS):
        for i, row in enumerate(group_rows(step, g)):
            rows.append({"step": step, "group": g, "prompt_id": f"{g}+3", "sample_idx": i, "prompt": f"{g}+3=",
                         "reward": row["rewards/correctness"] + row["rewards/length"], **row})
    totals = [r["reward"] for r in rows]
    for g in range(GROUPS):
        part = rows[g * G:(g + 1) * G]
        mean = sum(r["reward"] for r in part) / G
        std = (sum((r["reward"] - mean) ** 2 for r in part) / G) ** 0.5
        for r in part:
            r["advantage"] = (r["reward"] - mean) / std if std else 0.0
    if lens:
        per_reward = {k: [r[f"rewards/{k}"] for r in rows] for k in WEIGHTS}
        decided = honesty.deciders(per_reward, WEIGHTS, G)
        checked = set(honesty.high_scorers(totals, G))
        for i, r in enumerate(rows):
            r["decided_by"] = decided[i]
            r["strict_pass"] = (r["completion"] == r["answer"]) if i in checked else None
    return {k: [r[k] for r in rows] for k in rows[0]}


def write_run(root: Path, name: str, lens: bool = True, answers: bool = True) -> Path:
    """A finished GRPO run of STEPS steps in `root`/`name` (`answers`: with the samples' reference answers)."""
    paths = RunPaths(root / name)
    paths.root.mkdir(parents=True)
    t0 = time.time() - 60
    write_json_atomic(paths.config, {"name": name, "algo": "grpo", "model": "tiny", "task": "arithmetic",
                                     "max_steps": STEPS, "group_size": G, "prompts_per_step": GROUPS, "beta": 0.04,
                                     "std_mode": "group", "loss_aggregation": "sequence", "max_new_tokens": 6,
                                     "rewards": WEIGHTS})
    writer = RunWriter(paths, "full", flush_seconds=0, compact_every=1000)
    trends = honesty.Trends()
    for step in range(1, STEPS + 1):
        rows = samples(step, lens)
        totals = rows["reward"]
        scalars = {"reward/mean": sum(totals) / len(totals), "reward/std": 0.5, "kl/mean": 0.01 * step,
                   "completion/length_mean": sum(rows["length"]) / len(totals)}
        if lens:
            per_reward = {k: rows[f"rewards/{k}"] for k in WEIGHTS}
            scalars.update(honesty.step_figures(per_reward, WEIGHTS, totals, rows["length"], G,
                                                rows["strict_pass"], rows["decided_by"]))
            scalars.update(trends.figures(scalars))
        writer.log("scalars", {"step": [step], "time": [t0 + step], "wall_s": [float(step)],
                               **{k: [float(v)] for k, v in scalars.items()}})
        writer.log("samples", rows if answers else {k: v for k, v in rows.items() if k != "answer"})
    writer.flush()
    writer.close()
    write_json_atomic(paths.status, {"schema_version": SCHEMA_VERSION, "state": "finished", "step": STEPS,
                                     "total_steps": STEPS, "started_at": t0, "updated_at": t0 + STEPS, "error": None,
                                     "name": name, "algo": "grpo", "model": "tiny", "task": "arithmetic"})
    return paths.root
