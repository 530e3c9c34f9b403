"""A small run whose groups have known figures, for the curve-to-groups tests (AppTest and browser).

Step 1..3, 4 groups of 4 completions. At every step each group leads exactly one or more orderings
(TOP): group 2 has the most KL, group 1 the most clipped tokens, group 3 no signal, ... so a test can
say which group each ordering must open on. `per_sample=False` writes the run as older runs and
imports are: no clipped_tokens / entropy_mean / ratio_max columns (clip_frac instead), and token detail
for groups 0 and 1 only.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from grpo_lab.rundir.layout import SCHEMA_VERSION, RunPaths, write_json_atomic
from grpo_lab.rundir.writer import RunWriter

G, GROUPS, STEPS = 4, 4, 3
# per group: kl_mean, clipped_tokens, entropy_mean, ratio_max, length, truncated completions, rewards, tool_errors
FIGURES = {
    0: (0.01, 1, 2.0, 1.10, 5, 0, (1, 0, 0, 0), 0),
    1: (0.02, 9, 0.5, 3.00, 3, 1, (1, 1, 0, 0), 2),
    2: (0.30, 2, 0.7, 1.20, 8, 3, (1, 1, 1, 0), 0),
    3: (0.05, 0, 0.9, 1.05, 2, 0, (1, 1, 1, 1), 1),
}
TOP = {"kl": 2, "clip": 1, "no_signal": 3, "entropy": 0, "ratio_max": 1, "length": 2, "truncated": 2, "reward": 3,
       "tool_errors": 1}
EXPECTED_LOSS = 0.0  # sequence aggregation: every group's advantages sum to 0


def _advantages(rewards: tuple[int, ...]) -> list[float]:
    r = np.asarray(rewards, dtype=float)
    std = r.std()
    return ((r - r.mean()) / std).tolist() if std > 0 else [0.0] * len(r)


def samples(step: int, per_sample: bool) -> dict[str, list]:
    cols: dict[str, list] = {k: [] for k in ("step", "group", "prompt_id", "sample_idx", "prompt", "completion",
                                             "reward", "advantage", "length", "truncated", "ratio_mean", "clip_frac",
                                             "kl_mean", "tool_errors")}
    if per_sample:
        cols.update(clipped_tokens=[], entropy_mean=[], ratio_max=[])
    for g, (kl, clipped, entropy, ratio_max, length, truncated, rewards, errors) in FIGURES.items():
        for i, (reward, adv) in enumerate(zip(rewards, _advantages(rewards))):
            cols["step"].append(step)
            cols["group"].append(g)
            cols["prompt_id"].append(f"{g}+{step}")
            cols["sample_idx"].append(i)
            cols["prompt"].append(f"{g}+{step}=")
            cols["completion"].append(f"answer {g}.{i}")
            cols["reward"].append(float(reward))
            cols["advantage"].append(adv)
            cols["length"].append(length)
            cols["truncated"].append(i < truncated)
            cols["ratio_mean"].append(1.0)
            mine = clipped // G + (i < clipped % G)  # the group's clipped tokens, shared out over its completions
            cols["clip_frac"].append(mine / length)
            cols["kl_mean"].append(kl)
            cols["tool_errors"].append(errors if i == 0 else 0)
            if per_sample:
                cols["clipped_tokens"].append(mine)
                cols["entropy_mean"].append(entropy)
                cols["ratio_max"].append(ratio_max)
    return cols


def tokens(step: int, groups: tuple[int, ...]) -> dict[str, list]:
    cols: dict[str, list] = {k: [] for k in ("step", "group", "prompt_id", "sample_idx", "position", "token",
                                             "ratio", "kl", "clipped_low", "clipped_high", "clipped", "advantage")}
    for g in groups:
        kl, clipped, _, ratio_max, length, _, rewards, _ = FIGURES[g]
        for i, adv in enumerate(_advantages(rewards)):
            for p in range(length):
                hit = i * length + p < clipped
                for k, v in (("step", step), ("group", g), ("prompt_id", f"{g}+{step}"), ("sample_idx", i),
                             ("position", p), ("token", "x"), ("ratio", ratio_max if p == 0 else 1.0), ("kl", kl),
                             ("clipped_low", hit), ("clipped_high", False), ("clipped", hit), ("advantage", adv)):
                    cols[k].append(v)
    return cols


def scalars(step: int, t0: float) -> dict[str, list]:
    return {"step": [step], "time": [t0 + step], "wall_s": [float(step)], "reward/mean": [0.6 + 0.1 * step],
            "kl/mean": [0.1 * step], "clip/total": [0.05], "groups/frac_zero_std": [0.25], "entropy/mean": [1.0],
            "ratio/max": [3.0], "loss/policy": [0.0], "loss/total": [0.004 * step], "grad/norm": [1.0],
            "completion/length_mean": [4.5], "completion/truncated_frac": [0.25], "advantage/std": [0.8]}


def write_run(root: Path, name: str, per_sample: bool = True, token_groups: tuple[int, ...] = (0, 1),
              events: dict[str, list] | None = None) -> Path:
    """A finished GRPO run of STEPS steps in `root`/`name`."""
    paths = RunPaths(root / name)
    paths.root.mkdir(parents=True)
    t0 = time.time() - 60
    write_json_atomic(paths.config, {"name": name, "algo": "grpo", "model": "tiny", "task": "arithmetic",
                                     "max_steps": STEPS, "group_size": G, "prompts_per_step": GROUPS, "beta": 0.04,
                                     "std_mode": "group", "loss_aggregation": "sequence", "max_new_tokens": 8,
                                     "token_detail_groups": len(token_groups), "rewards": {"correctness": 1.0}})
    writer = RunWriter(paths, "full", flush_seconds=0, compact_every=1000)
    for step in range(1, STEPS + 1):
        writer.log("scalars", scalars(step, t0))
        writer.log("samples", samples(step, per_sample))
        if token_groups:
            writer.log("tokens", tokens(step, token_groups))
    if events:
        writer.log("events", events)
    writer.flush()
    writer.close()
    write_json_atomic(paths.status, {"schema_version": SCHEMA_VERSION, "state": "finished", "step": STEPS,
                                     "total_steps": STEPS, "started_at": t0, "updated_at": t0 + STEPS, "error": None,
                                     "name": name, "algo": "grpo", "model": "tiny", "task": "arithmetic"})
    return paths.root
