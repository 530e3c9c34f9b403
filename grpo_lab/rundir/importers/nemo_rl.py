"""A NeMo-RL GRPO log folder as a run directory: its `train_data_step<N>.jsonl` files.

NeMo-RL's GRPO loop (nemo_rl/algorithms/grpo.py) writes, after each step, one JSON object per sample
through its Logger.log_batched_dict_as_jsonl (the sample's fields and an `idx`): `content` (each message's
text, in order: the prompt's messages, then the response; roles are not written), `rewards` (the total
reward), `advantages`, `token_loss_mask`, `generation_logprobs` (the sampler's, vLLM's) and `prev_logprobs`
(the trainer's pi_old), one value per token of the padded sequence, and `token_ids`, `input_lengths`,
`sample_loss_mask`. With dynamic sampling `rewards` is every sample's and `filtered_rewards` those trained on.

Here: the prompt is the messages before the last, joined by a blank line; the completion is the last
message (a multi-turn rollout's earlier turns stay in the prompt). The advantage is NeMo-RL's own: the
value at the first loss token (GRPO gives every token of a response the same one). Groups: NeMo-RL repeats
each prompt num_generations_per_prompt times one after another (repeat_interleave), so a group is a block
of n rows with one prompt, n being --group-size or found as verl's importer finds it (verl.groups). The
sampler's and the trainer's log-probs give the step's mismatch/* figures (objective/mismatch.py) and each
completion's `mismatch_mean`: Live's "Sampler vs trainer" section.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import torch

from grpo_lab.objective import mismatch
from grpo_lab.rundir.importers import limits, samples, verl
from grpo_lab.rundir.importers.build import SourceError, finish_steps, write_steps

FILE = re.compile(r"train_data_step([0-9]+)\.jsonl", re.ASCII)
EXPECTED = "a JSON object with content (a list of message texts) and rewards (a number)"


def step_files(source: Path) -> list[tuple[int, Path]]:
    try:
        entries = list(os.scandir(source))
    except OSError as exc:
        raise SourceError(f"{source}: cannot be listed ({exc.strerror})") from None
    found = [(limits.step_number(m.group(1), Path(e.path)), Path(e.path))
             for e in entries if (m := FILE.fullmatch(e.name))]
    return limits.unique_steps(found)


def looks_like(source: Path) -> bool:
    try:
        return any(FILE.fullmatch(e.name) for e in os.scandir(source))
    except OSError:
        return False


def parse_line(line: bytes, where: str) -> dict[str, Any]:
    """One sample, checked: content a non-empty list of texts, rewards a number (or null)."""
    try:
        row = json.loads(line.decode("utf-8"), parse_constant=limits.refuse_constant)
    except (UnicodeDecodeError, ValueError):
        raise SourceError(f"{where}: expected {EXPECTED}; the line is not JSON") from None
    except RecursionError:
        raise SourceError(f"{where}: JSON nested deeper than {limits.MAX_DEPTH} levels") from None
    content = row.get("content") if isinstance(row, dict) else None
    if not (isinstance(content, list) and content and all(isinstance(c, str) for c in content)) or "rewards" not in row:
        raise SourceError(f"{where}: expected {EXPECTED}")
    for text in content:
        limits.text(text, where, "content")
    row["rewards"] = None if row["rewards"] is None else limits.number(row["rewards"], where, "rewards")
    for key in ("advantages", "token_loss_mask", "generation_logprobs", "prev_logprobs"):
        value = row.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(v, (int, float)) for v in value)):
            raise SourceError(f"{where}: {key} must be a list of numbers (one per token)")
    row["input"] = "\n\n".join(content[:-1])  # verl.groups reads a row's prompt as `input`
    return row


def read_rows(path: Path) -> list[dict[str, Any]]:
    return limits.jsonl_rows(path, parse_line, f"NeMo-RL's train data, one {EXPECTED} per line")


def advantage(row: dict[str, Any]) -> float:
    """NeMo-RL's advantage of the sample: at its first loss token (NaN where it has none).

    >>> advantage({"advantages": [0.0, 0.0, 0.7, 0.7], "token_loss_mask": [0, 0, 1, 1]})
    0.7
    """
    values, mask = row.get("advantages") or [], row.get("token_loss_mask") or []
    return next((float(a) for a, m in zip(values, mask) if m), math.nan)


def token_matrix(rows: list[dict[str, Any]], key: str) -> torch.Tensor:
    """(B, T) of a per-token list, NaN-padded to the longest."""
    width = max(len(r.get(key) or []) for r in rows)
    out = torch.full((len(rows), width), math.nan, dtype=torch.float64)
    for i, r in enumerate(rows):
        values = r.get(key) or []
        out[i, :len(values)] = torch.tensor(values, dtype=torch.float64)
    return out


def sampler_figures(rows: list[dict[str, Any]]) -> tuple[dict[str, float], list[float | None]]:
    """mismatch/* of the step and each sample's mean |log w|, from generation_logprobs against prev_logprobs
    over the loss tokens; ({}, nulls) where the files have no log-probs."""
    if not all(r.get(k) for r in rows for k in ("generation_logprobs", "prev_logprobs", "token_loss_mask")):
        return {}, [None] * len(rows)
    sampler, trainer = token_matrix(rows, "generation_logprobs"), token_matrix(rows, "prev_logprobs")
    mask = token_matrix(rows, "token_loss_mask").nan_to_num(0.0)
    width = min(sampler.shape[1], trainer.shape[1], mask.shape[1])
    sampler, trainer, mask = sampler[:, :width], trainer[:, :width], mask[:, :width]
    figures = {f"mismatch/{k}": v for k, v in mismatch.figures(trainer, sampler, mask).items()}
    per = mismatch.per_completion(trainer, sampler, mask).tolist()
    return figures, [None if math.isnan(v) else v for v in per]


def step_tables(step: int, rows: list[dict[str, Any]], members: list[list[int]]
                ) -> tuple[dict[str, pa.Array], dict[str, float]]:
    """One step's samples columns (NeMo-RL's advantage, the sampler gap per sample) and scalars."""
    ordered = [rows[i] for m in members for i in m]
    reward = [math.nan if r["rewards"] is None else r["rewards"] for r in ordered]
    adv = [advantage(r) for r in ordered]
    zero_std = verl.frac_zero_std([[math.nan if rows[i]["rewards"] is None else rows[i]["rewards"] for i in m]
                                   for m in members])
    figures, per_sample = sampler_figures(ordered)
    cols = samples.columns(step=step, group=[g for g, m in enumerate(members) for _ in m],
                           sample_idx=[k for m in members for k in range(len(m))],
                           prompt=[r["input"] for r in ordered], completion=[r["content"][-1] for r in ordered],
                           reward=reward, advantage=adv)
    cols["mismatch_mean"] = pa.array(per_sample, pa.float64())
    scalars = verl.step_metrics(reward, [a for a in adv if not math.isnan(a)] or [math.nan], zero_std)
    return cols, {**scalars, **figures}


def convert(source: Path, paths, *, name: str, group_size: int | None = None) -> None:
    files = step_files(source)
    if not files:
        raise SourceError(f"{source}: expected NeMo-RL's log folder: train_data_step<N>.jsonl files")
    seen = write_steps(paths, files, read=read_rows, group=lambda rows, path: verl.groups(rows, path, group_size),
                       tables=step_tables)
    finish_steps(paths, source, files, seen, name=name, source="nemo-rl", advantage_source="nemo-rl",
                 task="NeMo-RL train data")
