"""A verl rollout dump as a run directory.

verl's trainer, given `trainer.rollout_data_dir=DIR`, writes `DIR/<step>.jsonl` after each step:
one JSON object per completion with `input` (the prompt, decoded), `output` (the response),
`score` (its total reward), `step`, and, depending on the version, `gts` (the reference answer)
and the reward function's extra values. Nothing says which rows form a group, and the advantages
are not in the dump: a group is the rows of one step with the same input, and the advantages are
recomputed here with `grpo_lab.trainer.objective.group_advantages` (config.json says
`advantage_source: "recomputed"` and which std_mode was used). verl's GRPO divides by the N-1
std (std_mode "sample", which also is the default here), plus an epsilon of 1e-6.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from grpo_lab.rundir.importers import samples
from grpo_lab.rundir.importers.build import SourceError, finish, open_writer, scalar_row
from grpo_lab.rundir.layout import RunPaths
from grpo_lab.trainer.objective import group_advantages

KNOWN = ("input", "output", "score", "step", "gts")
EXTRA_PREFIX = "verl/"


def step_files(source: Path) -> list[tuple[int, Path]]:
    return sorted((int(p.stem), p) for p in source.glob("*.jsonl") if p.stem.isdigit())


def looks_like(source: Path) -> bool:
    return bool(step_files(source))


def read_rows(path: Path) -> list[dict[str, Any]]:
    expected = "a JSON object with input (text), output (text) and score (number)"
    rows = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(f"{path}: expected verl's rollout dump (JSON lines); {type(exc).__name__}: {exc}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise SourceError(f"{path}:{number}: expected {expected}; the line is not JSON") from None
        if not isinstance(row, dict):
            raise SourceError(f"{path}:{number}: expected {expected}; got {type(row).__name__}")
        bad = [k for k, ok in (("input", isinstance(row.get("input"), str)),
                               ("output", isinstance(row.get("output"), str)),
                               ("score", "score" in row and (row["score"] is None or _is_number(row["score"]))))
               if not ok]
        if bad:
            raise SourceError(f"{path}:{number}: expected {expected}; {', '.join(bad)} missing or of the wrong type")
        rows.append(row)
    if not rows:
        raise SourceError(f"{path}: expected verl's rollout dump, one {expected} per line; the file is empty")
    return rows


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def convert(source: Path, paths: RunPaths, *, name: str, std_mode: str) -> None:
    files = step_files(source)
    if not files:
        raise SourceError(f"{source}: expected verl's rollout dump: <step>.jsonl files (trainer.rollout_data_dir)")
    writer = open_writer(paths)
    start = files[0][1].stat().st_mtime
    sizes: Counter[int] = Counter()
    prompts_first_step = 0
    for step, path in files:
        rows = read_rows(path)
        order: dict[str, list[int]] = {}  # input -> its rows, groups in order of first appearance
        for i, row in enumerate(rows):
            order.setdefault(row["input"], []).append(i)
        members = list(order.values())
        sizes.update(len(m) for m in members)
        prompts_first_step = prompts_first_step or len(members)
        # One (groups, largest G) matrix, NaN-padded: group_advantages leaves NaN out of mean and std.
        width = max(len(m) for m in members)
        scores = torch.full((len(members), width), math.nan, dtype=torch.float64)
        for g, m in enumerate(members):
            scores[g, :len(m)] = torch.tensor([_score(rows[i]) for i in m], dtype=torch.float64)
        result = group_advantages(scores, std_mode)
        flat = [(g, k, i) for g, m in enumerate(members) for k, i in enumerate(m)]
        advantage = [float(result.advantages[g, k]) for g, k, _ in flat]
        reward = [_score(rows[i]) for _, _, i in flat]
        extra = extra_columns([rows[i] for _, _, i in flat])
        writer.log("samples", samples.columns(
            step=step, group=[g for g, _, _ in flat], sample_idx=[k for _, k, _ in flat],
            prompt=[rows[i]["input"] for _, _, i in flat], completion=[rows[i]["output"] for _, _, i in flat],
            reward=reward, advantage=advantage, extra=extra))
        writer.log("scalars", scalar_row(step, path.stat().st_mtime, start,
                                         step_metrics(reward, advantage, result.zero_std.float().mean().item())))
        writer.flush()
    writer.close()

    last = files[-1][0]
    config = {
        "name": name, "algo": "grpo", "source": "verl", "advantage_source": "recomputed", "std_mode": std_mode,
        "model": "unknown", "task": "verl rollout dump", "group_size": sizes.most_common(1)[0][0],
        "prompts_per_step": prompts_first_step, "max_steps": last, "token_detail_groups": 0, "rewards": {},
        "imported_from": str(source.resolve()),
    }
    finish(paths, config, step=last, total_steps=last, started_at=start, updated_at=files[-1][1].stat().st_mtime)


def _score(row: dict[str, Any]) -> float:
    return math.nan if row.get("score") is None else float(row["score"])


def extra_columns(rows: list[dict[str, Any]]) -> dict[str, list[float | None]]:
    """The reward function's extra values that are numbers (or null) on every row, as verl/<key>."""
    keys = {k for row in rows for k in row if k not in KNOWN}
    return {EXTRA_PREFIX + k: [None if row.get(k) is None else float(row[k]) for row in rows] for k in sorted(keys)
            if all(row.get(k) is None or _is_number(row.get(k)) or isinstance(row.get(k), bool) for row in rows)}


def step_metrics(reward: list[float], advantage: list[float], frac_zero_std: float) -> dict[str, float]:
    """What the dump tells about a step, under our names (docs/run-directory.md): rewards and advantages."""
    scored = torch.tensor([r for r in reward if not math.isnan(r)], dtype=torch.float64)
    adv = torch.tensor(advantage, dtype=torch.float64)
    out = {"groups/frac_zero_std": frac_zero_std,
           "advantage/mean": adv.mean().item(), "advantage/std": adv.std(correction=0).item(),
           "advantage/min": adv.min().item(), "advantage/max": adv.max().item()}
    if len(scored):
        out.update({"reward/mean": scored.mean().item(), "reward/std": scored.std(correction=0).item(),
                    "reward/min": scored.min().item(), "reward/max": scored.max().item()})
    return out
