"""A verl rollout dump as a run directory.

verl's trainer, given `trainer.rollout_data_dir=DIR`, writes `DIR/<step>.jsonl` after each step:
one JSON object per completion with `input` (the prompt, decoded), `output` (the response),
`score` (its total reward), `step`, and, depending on the version, `gts` (the reference answer),
`uid` (the prompt's id in the batch) and the reward function's extra values (`acc`, `pred`, ...).
The advantages are not in the dump: they are recomputed here with
`grpo_lab.objective.functions.group_advantages` (config.json says `advantage_source: "recomputed"`
and which std_mode was used). verl's GRPO divides by the N-1 std (std_mode "sample", which also is
the default here), plus an epsilon of 1e-6.

Groups: the rows of one step with the same `uid` when the dump has it; else consecutive blocks of
n rows (verl repeats each prompt's n responses one after the other, `repeat(interleave=True)`).
Never by prompt text alone: one prompt drawn twice in a step is two groups, as verl trained it
(`groups` says how n is found, and when the rows cannot be split and the import refuses). What
each line may hold: importers/limits.py.
"""

from __future__ import annotations

import functools
import json
import math
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import torch

from grpo_lab.rundir.importers import limits, samples
from grpo_lab.rundir.importers.build import SourceError, finish_steps, write_steps
from grpo_lab.rundir.layout import RunPaths
from grpo_lab.objective.functions import group_advantages

KNOWN = ("input", "output", "score", "step", "uid")
EXPECTED = "a JSON object with input (text), output (text) and score (number)"


def step_files(source: Path) -> list[tuple[int, Path]]:
    """`<step>.jsonl` files, by step. A name that only looks like a number (`².jsonl`), a step
    wider than a run directory holds, or two files of one step are refused."""
    found = []
    try:
        entries = list(os.scandir(source))
    except OSError as exc:
        raise SourceError(f"{source}: cannot be listed ({exc.strerror})") from None
    for entry in entries:
        stem, dot, ext = entry.name.rpartition(".")
        if dot and ext == "jsonl" and (stem.isdigit() or stem.isdecimal() or limits.ASCII_STEP.fullmatch(stem)):
            found.append((limits.step_number(stem, Path(entry.path)), Path(entry.path)))
    return limits.unique_steps(found)


def looks_like(source: Path) -> bool:
    try:
        return any(e.name.endswith(".jsonl") for e in os.scandir(source))
    except OSError:
        return False


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The file's rows, each line checked (limits.py); one line naming file:line for the first bad one."""
    return limits.jsonl_rows(path, parse_line, f"verl's rollout dump, one {EXPECTED} per line")


def parse_line(line: bytes, where: str) -> dict[str, Any]:
    try:
        row = json.loads(line.decode("utf-8"), parse_constant=limits.refuse_constant)
    except UnicodeDecodeError:
        raise SourceError(f"{where}: expected {EXPECTED}; the line is not UTF-8") from None
    except RecursionError:
        raise SourceError(f"{where}: JSON nested deeper than {limits.MAX_DEPTH} levels") from None
    except ValueError as exc:
        why = str(exc) if "finite" in str(exc) else "the line is not JSON"
        raise SourceError(f"{where}: expected {EXPECTED}; {why}") from None
    if not isinstance(row, dict):
        raise SourceError(f"{where}: expected {EXPECTED}; got {type(row).__name__}")
    if limits.depth(row) > limits.MAX_DEPTH:
        raise SourceError(f"{where}: JSON nested deeper than {limits.MAX_DEPTH} levels")
    bad = [k for k, ok in (("input", isinstance(row.get("input"), str)),
                           ("output", isinstance(row.get("output"), str)),
                           ("score", "score" in row)) if not ok]
    if bad:
        raise SourceError(f"{where}: expected {EXPECTED}; {', '.join(bad)} missing or of the wrong type")
    row["score"] = None if row["score"] is None else limits.number(row["score"], where, "score")
    limits.text(row["input"], where, "input")
    limits.text(row["output"], where, "output")
    extras = [k for k in row if k not in KNOWN]
    if len(extras) > limits.MAX_EXTRAS or any(len(k) > limits.MAX_NAME_CHARS for k in extras):
        raise SourceError(f"{where}: at most {limits.MAX_EXTRAS} extra keys of at most {limits.MAX_NAME_CHARS} "
                          "characters each (each becomes a column)")
    for key in extras:
        row[key] = limits.extra(row[key], where, key)
    return row


def groups(rows: list[dict[str, Any]], path: Path, group_size: int | None = None) -> list[list[int]]:
    """Row indices of each group, in order of first appearance (see the module docstring).

    Without a uid: n is --group-size, else the gcd of how often each input appears in the step
    (a prompt drawn twice has 2n rows). Rows in consecutive blocks of n responses to one input
    (verl's order) are those blocks: a prompt drawn twice is two groups. Rows in another order (a
    dump after verl's balance_batch) are grouped by input only while that is unambiguous: every
    input appears n times; an input seen more often is refused, not merged."""
    if all(isinstance(r.get("uid"), (str, int)) and not isinstance(r.get("uid"), bool) for r in rows):
        return _by_key(rows, "uid")
    members = _by_key(rows, "input")
    n = group_size or functools.reduce(math.gcd, (len(m) for m in members))
    blocks = [list(range(s, min(s + n, len(rows)))) for s in range(0, len(rows), n)]
    if all(len(b) == n and len({rows[i]["input"] for i in b}) == 1 for b in blocks):
        return blocks
    odd = next((m for m in members if len(m) != n), None)
    if odd is not None:
        raise SourceError(f"{path}:{odd[0] + 1}: this input has {len(odd)} responses, the others {n}, and the "
                          "lines are neither in blocks of one prompt's responses nor carry a uid: its groups "
                          "cannot be told apart (--group-size: verl's rollout.n)")
    return members


def _by_key(rows: list[dict[str, Any]], key: str) -> list[list[int]]:
    order: dict[Any, list[int]] = {}
    for i, row in enumerate(rows):
        order.setdefault(row[key], []).append(i)
    return list(order.values())


def convert(source: Path, paths: RunPaths, *, name: str, std_mode: str, group_size: int | None = None,
            logged: dict[int, dict[str, float]] | None = None) -> None:
    """`logged`: the run's tracker scalars by step, under our names (importers/trackers.py), joined to the
    dump's steps; where both have a figure the dump's own wins (reward/*, advantage/*: computed from its rows)."""
    files = step_files(source)
    if not files:
        raise SourceError(f"{source}: expected verl's rollout dump: <step>.jsonl files (trainer.rollout_data_dir)")
    kinds: dict[str, str] = {}  # extra column -> number or text, fixed at its first appearance

    def tables(step: int, rows: list[dict[str, Any]], members: list[list[int]]
               ) -> tuple[dict[str, pa.Array], dict[str, float]]:
        # One (groups, largest G) matrix, NaN-padded: group_advantages leaves NaN out of mean and std.
        width = max(len(m) for m in members)
        scores = torch.full((len(members), width), math.nan, dtype=torch.float64)
        for g, m in enumerate(members):
            scores[g, :len(m)] = torch.tensor([_score(rows[i]) for i in m], dtype=torch.float64)
        result = group_advantages(scores, std_mode)
        flat = [(g, k, i) for g, m in enumerate(members) for k, i in enumerate(m)]
        ordered = [rows[i] for _, _, i in flat]
        advantage = [float(result.advantages[g, k]) for g, k, _ in flat]
        reward = [_score(r) for r in ordered]
        keys = sorted({k for r in ordered for k in r if k not in KNOWN})
        extra = samples.extra_columns({k: [r.get(k) for r in ordered] for k in keys}, kinds)
        answer = [None if r.get("gts") is None else str(r["gts"]) for r in ordered] if "extra/gts" in extra else None
        cols = samples.columns(
            step=step, group=[g for g, _, _ in flat], sample_idx=[k for _, k, _ in flat],
            prompt=[r["input"] for r in ordered], completion=[r["output"] for r in ordered],
            reward=reward, advantage=advantage, extra=extra, answer=answer)
        own = step_metrics(reward, advantage, result.zero_std.float().mean().item())
        return cols, {**(logged or {}).get(step, {}), **own}

    seen = write_steps(paths, files, read=read_rows, group=lambda rows, path: groups(rows, path, group_size),
                       tables=tables)
    finish_steps(paths, source, files, seen, name=name, source="verl", advantage_source="recomputed",
                 std_mode=std_mode, task="verl rollout dump")


def _score(row: dict[str, Any]) -> float:
    return math.nan if row.get("score") is None else float(row["score"])


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


def frac_zero_std(rewards: list[list[float]]) -> float:
    """The share of groups whose rewards have no spread (NaN: not scored, left out), as convert counts it.

    >>> frac_zero_std([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    0.5
    """
    width = max(len(g) for g in rewards)
    scores = torch.full((len(rewards), width), math.nan, dtype=torch.float64)
    for g, values in enumerate(rewards):
        scores[g, :len(values)] = torch.tensor(values, dtype=torch.float64)
    return group_advantages(scores, "sample").zero_std.float().mean().item()
