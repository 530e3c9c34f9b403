"""A prime-rl run's rollouts as a run directory: its FileMonitor's `traces.jsonl` files.

prime-rl's FileMonitor (prime_rl/monitors/file.py) appends each episode, as verifiers' `Episode.to_record()`
writes it (verifiers/v1/episode.py), to `<output_dir>/rollouts/step_<N>/<train|eval>/<all|effective>/traces.jsonl`.
An episode has `group.id` (its rollout group), `task`, and `traces`: each agent's trace holds the message graph
`nodes` (each with `parent`, `message` {role, content}, `sampled`: the model wrote it), `rewards` ({name: {score,
weight}}) and `info` (`advantage`, stamped by the trainer). The training rows here are `train/effective` (the
episodes a step trained on; `train/all` where a step has no effective file).

Per episode, its first trainable trace: the prompt is the messages before the first sampled one, the completion
the messages from it to the end of the graph's last branch (tool results included), joined by blank lines; the
reward verifiers' own total (the sum of score * weight), each reward's score as `rewards/<name>`; the advantage
`info.advantage` (prime-rl's, NaN where absent); the group its `group.id`, numbered by first appearance.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from grpo_lab.rundir.importers import limits, samples, verl
from grpo_lab.rundir.importers.build import SourceError, finish_steps, write_steps

STEP = re.compile(r"step_([0-9]+)", re.ASCII)
EXPECTED = "an episode record (verifiers' Episode.to_record: traces with message nodes)"


def rollouts(source: Path) -> Path:
    return source / "rollouts" if (source / "rollouts").is_dir() else source


def looks_like(source: Path) -> bool:
    try:
        return any(STEP.fullmatch(e.name) and e.is_dir() for e in os.scandir(rollouts(source)))
    except OSError:
        return False


def step_files(source: Path) -> list[tuple[int, Path]]:
    """Each step's training episodes: train/effective/traces.jsonl, else train/all/traces.jsonl."""
    folder = rollouts(source)
    found = []
    for entry in os.scandir(folder):
        if (m := STEP.fullmatch(entry.name)) and entry.is_dir():
            for subset in ("effective", "all"):
                path = Path(entry.path) / "train" / subset / "traces.jsonl"
                if path.is_file():
                    found.append((limits.step_number(m.group(1), path), path))
                    break
    return limits.unique_steps(found)


def text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of parts (images dropped, as verifiers does).

    >>> text("hi"), text([{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}])
    ('hi', 'a\\nb')
    """
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in content or [] if isinstance(p, dict) and isinstance(p.get("text"), str))


def last_branch(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The nodes from the root to the graph's last leaf (verifiers' Trace.branches, the last one)."""
    parents = {n.get("parent") for n in nodes if n.get("parent") is not None}
    leaf = max(i for i in range(len(nodes)) if i not in parents)
    path, seen = [], set()
    while leaf is not None and leaf not in seen and 0 <= leaf < len(nodes):
        seen.add(leaf)  # a parent cycle in a hostile file ends the walk
        path.append(nodes[leaf])
        leaf = nodes[leaf].get("parent")
    return path[::-1]


def sample(episode: Any, where: str) -> dict[str, Any]:
    """One episode as a row: prompt, completion, reward, per-reward scores, advantage, group key."""
    traces = episode.get("traces") if isinstance(episode, dict) else None
    if not isinstance(traces, list) or not traces or not all(isinstance(t, dict) for t in traces):
        raise SourceError(f"{where}: expected {EXPECTED}; no traces")
    trace = next((t for t in traces if (t.get("agent") or {}).get("trainable", True)), traces[0])
    nodes = trace.get("nodes")
    if not isinstance(nodes, list) or not nodes or not all(isinstance(n, dict) and isinstance(n.get("message"), dict)
                                                           for n in nodes):
        raise SourceError(f"{where}: expected {EXPECTED}; the trace has no message nodes")
    path = last_branch(nodes)
    first = next((i for i, n in enumerate(path) if n.get("sampled")), len(path))
    messages = [text(n["message"].get("content")) for n in path]
    rewards = {name: limits.number(r["score"], where, f"rewards.{name}.score")
               for name, r in (trace.get("rewards") or {}).items() if isinstance(r, dict) and "score" in r}
    weights = {name: limits.number(r.get("weight", 1.0), where, f"rewards.{name}.weight")
               for name, r in (trace.get("rewards") or {}).items() if isinstance(r, dict) and "score" in r}
    adv = (trace.get("info") or {}).get("advantage")
    group = (episode.get("group") or {}).get("id")
    row = {"input": "\n\n".join(messages[:first]), "output": "\n\n".join(messages[first:]),
           "reward": sum(rewards[n] * weights[n] for n in rewards) if rewards else math.nan, "rewards": rewards,
           "advantage": math.nan if adv is None else limits.number(adv, where, "info.advantage"),
           "uid": str(group) if group is not None else None}
    limits.text(row["input"], where, "prompt")
    limits.text(row["output"], where, "completion")
    return row


def parse_line(line: bytes, where: str) -> dict[str, Any]:
    try:
        episode = json.loads(line.decode("utf-8"), parse_constant=limits.refuse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise SourceError(f"{where}: expected {EXPECTED}; the line is not JSON") from None
    return sample(episode, where)


def read_rows(path: Path) -> list[dict[str, Any]]:
    return limits.jsonl_rows(path, parse_line, f"prime-rl's rollouts, one {EXPECTED} per line")


def step_tables(step: int, rows: list[dict[str, Any]], members: list[list[int]]
                ) -> tuple[dict[str, pa.Array], dict[str, float]]:
    """One step's samples columns (each reward's score as its own column) and scalars."""
    ordered = [rows[i] for m in members for i in m]
    names = sorted({n for r in ordered for n in r["rewards"]})
    reward, adv = [r["reward"] for r in ordered], [r["advantage"] for r in ordered]
    cols = samples.columns(
        step=step, group=[g for g, m in enumerate(members) for _ in m],
        sample_idx=[k for m in members for k in range(len(m))], prompt=[r["input"] for r in ordered],
        completion=[r["output"] for r in ordered], reward=reward, advantage=adv,
        per_fn={n: [r["rewards"].get(n) for r in ordered] for n in names})
    zero_std = verl.frac_zero_std([[rows[i]["reward"] for i in m] for m in members])
    known = [a for a in adv if not math.isnan(a)] or [math.nan]
    return cols, verl.step_metrics(reward, known, zero_std)


def convert(source: Path, paths, *, name: str, group_size: int | None = None) -> None:
    files = step_files(source)
    if not files:
        raise SourceError(f"{source}: expected prime-rl's rollouts: rollouts/step_<N>/train/effective/traces.jsonl")
    # grouped by group.id where every episode has one
    seen = write_steps(paths, files, read=read_rows, group=lambda rows, path: verl.groups(rows, path, group_size),
                       tables=step_tables)
    finish_steps(paths, source, files, seen, name=name, source="prime-rl", advantage_source="prime-rl",
                 task="prime-rl rollouts")
