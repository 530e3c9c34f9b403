"""A finished TRL output folder as a run directory.

What TRL leaves there (GRPOTrainer, trl 1.16):
- `completions/completions_<step, 5 digits>.parquet`, written at every logging step when
  `log_completions=True`: columns step, prompt, completion, one column per reward function (its
  name; NaN: not scored), columns added by reward functions through `log_extra`, advantage (TRL's
  own). It holds the latest generation batch, in TRL's order: consecutive blocks of
  num_generations completions of one prompt. A batch trained on for several steps
  (num_iterations > 1) is written again at each; the copies are left out here. An evaluation
  logs too, and rewrites its step's file with the evaluation's completions (which stay in the
  log until the next generation): the files of evaluated steps, and their repeats, are left out.
- `trainer_state.json` (`trainer.save_state()`, or inside each `checkpoint-<step>/`):
  `log_history`, one record per log call with the metrics and `step`.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from grpo_lab.rundir.importers import names, samples
from grpo_lab.rundir.importers.build import SourceError, finish, open_writer, scalar_row
from grpo_lab.rundir.layout import RunPaths

COMPLETIONS_RE = re.compile(r"^completions_(\d+)\.parquet$")
REQUIRED = ("step", "prompt", "completion", "advantage")


def looks_like(source: Path) -> bool:
    return (source / "completions").is_dir() or state_file(source) is not None


def state_file(source: Path) -> Path | None:
    """trainer_state.json of the folder, else of its latest checkpoint-<step>/."""
    if (source / "trainer_state.json").is_file():
        return source / "trainer_state.json"
    checkpoints = [(int(p.name.split("-")[1]), p) for p in source.glob("checkpoint-*")
                   if p.name.split("-")[1].isdigit() and (p / "trainer_state.json").is_file()]
    return max(checkpoints)[1] / "trainer_state.json" if checkpoints else None


def completion_files(source: Path) -> list[tuple[int, Path]]:
    folder = source / "completions"
    found = [(int(m.group(1)), p) for p in folder.glob("*.parquet") if (m := COMPLETIONS_RE.match(p.name))]
    return sorted(found)


def read_state(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {"log_history": []}
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SourceError(f"{path}: expected TRL's trainer_state.json (JSON); {type(exc).__name__}: {exc}") from None
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        raise SourceError(f"{path}: expected trainer_state.json with a log_history list")
    return state


def convert(source: Path, paths: RunPaths, *, name: str, std_mode: str, group_size: int | None,
            reward_weights: dict[str, float]) -> None:
    files, state_path = completion_files(source), state_file(source)
    if not files and state_path is None:
        raise SourceError(f"{source}: expected a TRL output folder: completions/completions_<step>.parquet "
                          "(GRPOConfig(log_completions=True)) and/or trainer_state.json")
    state = read_state(state_path)
    history = [r for r in state["log_history"] if isinstance(r, dict) and isinstance(r.get("step"), int)]
    fn_names = sorted({k.split("/")[1] for r in history for k in r
                       if k.startswith("rewards/") and k.endswith("/mean") and k.count("/") == 2})
    group_size = group_size or infer_group_size(files)
    writer = open_writer(paths)
    times = {step: path.stat().st_mtime for step, path in files}
    start = min(times.values()) if times else None
    evaluated = {r["step"] for r in history if any(k.startswith("eval_") for k in r)}
    previous = None
    for step, path in files:
        df = read_completions(path)
        key = (df["prompt"].astype(str).tolist(), df["completion"].astype(str).tolist(), df["advantage"].tolist())
        if key == previous or step in evaluated:
            previous = key
            continue  # a batch logged again, or the evaluation's completions (see the module docstring)
        previous = key
        write_step(writer, path, df, group_size=group_size, fn_names=fn_names, weights=reward_weights)

    rows: dict[int, dict[str, float]] = {}
    for record in history:  # training, evaluation and end-of-training records of a step make one row
        rows.setdefault(record["step"], {}).update(names.metrics(record))
    for step, values in sorted(rows.items()):
        writer.log("scalars", scalar_row(step, times.get(step), start, values))
    writer.close()

    last = max([*rows, *(s for s, _ in files)], default=0)
    config = {
        "name": name, "algo": "grpo", "source": "trl", "advantage_source": "trl",
        "advantage_epsilon": 1e-4,  # TRL divides by std + 1e-4
        "model": model_name(source), "task": "TRL train_dataset", "group_size": group_size,
        "std_mode": std_mode, "max_steps": state.get("max_steps") or last, "token_detail_groups": 0,
        "rewards": {fn: reward_weights.get(fn, 1.0) for fn in fn_names},
        "trl/logging_steps": state.get("logging_steps"), "trl/train_batch_size": state.get("train_batch_size"),
        "imported_from": str(source.resolve()),
    }
    finish(paths, config, step=last, total_steps=int(state.get("max_steps") or last),
           started_at=start, updated_at=max(times.values()) if times else None)


def read_completions(path: Path):
    try:
        df = pq.read_table(path).to_pandas()
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the source's problem, named
        raise SourceError(f"{path}: expected a Parquet file of TRL completions; {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise SourceError(f"{path}: expected TRL's completions table with columns {', '.join(REQUIRED)} "
                          f"and one per reward function; missing {', '.join(missing)}")
    return df


def infer_group_size(files: list[tuple[int, Path]]) -> int:
    """num_generations from the completions: the gcd of the lengths of same-prompt runs (a prompt
    drawn twice in a row makes a run of 2G, which the gcd still divides)."""
    g = 0
    for _, path in files:
        prompts = [str(p) for p in read_completions(path)["prompt"]]
        start = 0
        for i in range(1, len(prompts) + 1):
            if i == len(prompts) or prompts[i] != prompts[start]:
                g, start = math.gcd(g, i - start), i
    return max(g, 1)


def write_step(writer, path: Path, df, *, group_size: int, fn_names: list[str], weights: dict[str, float]) -> None:
    n = len(df) - len(df) % group_size
    if n == 0:
        return
    df = df.iloc[len(df) - n:]
    prompts = [samples.text(p) for p in df["prompt"]]
    for start in range(0, n, group_size):
        if len(set(prompts[start:start + group_size])) > 1:
            raise SourceError(f"{path}: rows {start}-{start + group_size - 1}: expected a block of {group_size} "
                              "completions of one prompt (TRL's order); pass the run's --group-size (num_generations)")
    numeric = [c for c in df.columns if c not in REQUIRED and df[c].dtype.kind in "fiu"]
    fns = [c for c in numeric if c in fn_names] if fn_names else numeric
    per_fn = {fn: df[fn].astype(float).tolist() for fn in fns}
    group, sample_idx = samples.blocks(n, group_size)
    writer.log("samples", samples.columns(
        step=int(df["step"].iloc[0]), group=group, sample_idx=sample_idx, prompt=prompts,
        completion=[samples.text(c) for c in df["completion"]], reward=samples.weighted_total(per_fn, weights),
        advantage=df["advantage"].astype(float).tolist(), per_fn=per_fn))
    writer.flush()


def model_name(source: Path) -> str:
    """The saved model's config (`_name_or_path`, else its architecture), when the folder has one."""
    try:
        config = json.loads((source / "config.json").read_text())
        return str(config.get("_name_or_path") or (config.get("architectures") or ["unknown"])[0])
    except (OSError, ValueError, AttributeError):
        return "unknown"
