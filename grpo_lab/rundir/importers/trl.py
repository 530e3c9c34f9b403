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
  A batch is written at the step that generated it, the first to train on it. With
  steps_per_generation > gradient_accumulation_steps it is trained over several steps, but TRL
  shuffles it before splitting it, so which of them trained which completion is recorded nowhere.
  Columns that are neither required nor a reward function are what rewards logged with
  `log_extra`: kept as `extra/<name>` (numbers, else text), the native trainer's naming.
  In a run with tools, a completion is the conversation with its tool calls and results:
  read into `turns`, `tool_calls`, `tool_errors` (importers/turns.py) when any completion made a call.
  The prompt and completion are what TRL handed its rewards (a string, or messages): kept as
  `source_prompt` and `source_completion` too, so a rescore hands them over the same way (the keys
  Parquet adds to a message for other messages' fields, null, are dropped). The dataset's other
  columns and the completion ids are in no file TRL writes: an import has no `column/<name>`.
- `trainer_state.json` (`trainer.save_state()`, or inside each `checkpoint-<step>/`):
  `log_history`, one record per log call with the metrics and `step`; its keys sorted.
- `training_args.bin` (`save_model()`, and in each checkpoint): the GRPOConfig, pickled; read
  without running it (importers/trl_args.py). The only place that records `reward_weights` and
  `num_generations`, which are then taken as recorded, not inferred.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from grpo_lab.rundir.importers import limits, names, samples, trl_args, turns, weights
from grpo_lab.rundir.importers.build import SourceError, finish, open_writer, scalar_row
from grpo_lab.rundir.layout import RunPaths

COMPLETIONS_RE = re.compile(r"^completions_(.+)\.parquet$")
REQUIRED = ("step", "prompt", "completion", "advantage")


def looks_like(source: Path) -> bool:
    return (source / "completions").is_dir() or state_file(source) is not None


def state_file(source: Path) -> Path | None:
    """trainer_state.json of the folder, else of its latest checkpoint-<step>/."""
    if (source / "trainer_state.json").is_file():
        return source / "trainer_state.json"
    checkpoints = latest_checkpoints(source)
    return next((p / "trainer_state.json" for p in checkpoints if (p / "trainer_state.json").is_file()), None)


def latest_checkpoints(source: Path) -> list[Path]:
    """checkpoint-<step>/ folders, latest first (names that are not checkpoint-<ASCII digits> are skipped)."""
    found = [(int(p.name[11:]), p) for p in source.glob("checkpoint-*")
             if limits.ASCII_STEP.fullmatch(p.name[11:]) and len(p.name) < 40 and p.is_dir()]
    return [p for _, p in sorted(found, reverse=True)]


def completion_files(source: Path) -> list[tuple[int, Path]]:
    """completions_<step>.parquet by step: steps in ASCII digits up to limits.MAX_STEP, one file per step."""
    folder = source / "completions"
    found = [(limits.step_number(m.group(1), p), p) for p in folder.glob("*.parquet")
             if (m := COMPLETIONS_RE.match(p.name)) and (m.group(1).isdigit() or m.group(1).isdecimal()
                                                         or limits.ASCII_STEP.fullmatch(m.group(1)))]
    return limits.unique_steps(found)


def read_state(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {"log_history": []}
    with limits.open_regular(path) as fh:
        raw = fh.read(limits.MAX_STATE_BYTES + 1)
    if len(raw) > limits.MAX_STATE_BYTES:
        raise SourceError(f"{path}: larger than {limits.MAX_STATE_BYTES >> 20} MiB; not TRL's trainer_state.json")
    try:  # NaN and Infinity stay: the Trainer writes a diverged loss or grad norm that way
        state = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise SourceError(f"{path}: JSON nested deeper than Python can read; not TRL's trainer_state.json") from None
    except ValueError as exc:
        raise SourceError(f"{path}: expected TRL's trainer_state.json (JSON); {type(exc).__name__}: "
                          f"{str(exc)[:200]}") from None
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        raise SourceError(f"{path}: expected trainer_state.json with a log_history list")
    for i, record in enumerate(state["log_history"]):
        step = record.get("step") if isinstance(record, dict) else None
        if isinstance(step, int) and not isinstance(step, bool) and not 0 <= step <= limits.MAX_STEP:
            raise SourceError(f"{path}: log_history[{i}]: step {step} is outside 0..{limits.MAX_STEP}")
    return state


def convert(source: Path, paths: RunPaths, *, name: str, std_mode: str, group_size: int | None,
            reward_weights: dict[str, float]) -> None:
    files, state_path = completion_files(source), state_file(source)
    if not files and state_path is None:
        raise SourceError(f"{source}: expected a TRL output folder: completions/completions_<step>.parquet "
                          "(GRPOConfig(log_completions=True)) and/or trainer_state.json")
    state = read_state(state_path)
    args_path = trl_args.find(source, latest_checkpoints(source))
    options = trl_args.read(args_path) if args_path is not None else {}
    history = [r for r in state["log_history"] if isinstance(r, dict) and isinstance(r.get("step"), int)]
    fn_names = sorted({k.split("/")[1] for r in history for k in r
                       if k.startswith("rewards/") and k.endswith("/mean") and k.count("/") == 2})
    fn_names = fn_names or sorted(reward_weights)  # no trainer_state.json: the functions the option names
    fn_names, ordered = functions_in_order(fn_names, files)
    evaluated = {r["step"] for r in history if any(k.startswith("eval_") for k in r)}
    # Pass 1: which files hold a new training batch, num_generations, and each batch's reward terms.
    kept, terms, batches, previous, tools = [], {}, [], None, False
    for step, path in files:
        df = read_completions(path)
        key = (df["prompt"].astype(str).tolist(), df["completion"].astype(str).tolist(), df["advantage"].tolist())
        if key != previous and step not in evaluated:  # else a batch logged again, or an evaluation's (docstring)
            kept.append((step, path))
            tools = tools or turns.any_tool_turn(df["completion"])
            _, _, per_fn, advantage = checked(path, df, fn_names)
            if fn_names:
                terms[step] = weights.batch_terms(per_fn)
                batches.append((per_fn, advantage))
        previous = key
    recorded_g = options.get("num_generations")
    recorded_g = recorded_g if isinstance(recorded_g, int) and not isinstance(recorded_g, bool) and recorded_g > 0 else None
    group_size = group_size or recorded_g or (infer_group_size(kept) if kept else None)
    recorded = (trl_args.reward_weights(options, len(fn_names), f"{args_path}: reward_weights")
                if args_path is not None and fn_names else None)
    w = run_weights(source, fn_names, reward_weights, history, {s: t for s, t in terms.items() if t},
                    lambda found: weights.reproduces_advantages(batches, found, group_size) if batches else None,
                    recorded=recorded, ordered=ordered, recorded_in=args_path)
    weights_from = ("--reward-weights" if reward_weights else
                    f"{args_path.relative_to(source)} (GRPOConfig reward_weights)" if recorded is not None
                    else "the run's logged reward")

    writer = open_writer(paths)
    times = {step: path.stat().st_mtime for step, path in files}
    start = min(times.values()) if times else None
    kinds: dict[str, str] = {}  # extra column -> number or text, fixed where it first appears
    for step, path in kept:  # a batch at the step that generated it (see the module docstring)
        write_step(writer, path, read_completions(path), step=step, group_size=group_size, fn_names=fn_names,
                   weights=w, kinds=kinds, tools=tools)

    rows: dict[int, dict[str, float]] = {}
    differing = names.differing_metrics(options)  # TRL metrics that mean something else under these options
    for record in history:  # training, evaluation and end-of-training records of a step make one row
        rows.setdefault(record["step"], {}).update(names.metrics(record, differing))
    for step, values in sorted(rows.items()):
        writer.log("scalars", scalar_row(step, times.get(step), start, values))
    writer.close()

    last = max([*rows, *(s for s, _ in files)], default=0)
    config = {
        "name": name, "algo": "grpo", "source": "trl", "advantage_source": "trl",
        "advantage_epsilon": 1e-4,  # TRL divides by std + 1e-4
        "model": model_name(source), "task": "TRL train_dataset", "group_size": group_size,
        "std_mode": std_mode, "max_steps": state.get("max_steps") or last, "token_detail_groups": 0,
        "rewards": w, "reward_weights_from": weights_from,
        "trl/logging_steps": state.get("logging_steps"), "trl/train_batch_size": state.get("train_batch_size"),
        "imported_from": str(source.resolve()),
    }
    if options:  # the saved GRPOConfig: our fields where they map, every option as trl/<name> (as the callback)
        config = {**names.options(options), **names.trl_options(options), **config}
    finish(paths, config, step=last, total_steps=int(state.get("max_steps") or last),
           started_at=start, updated_at=max(times.values()) if times else None)


def functions_in_order(fns: list[str], files: list[tuple[int, Path]]) -> tuple[list[str], bool]:
    """The reward functions in reward_funcs order, and whether that order is known: TRL writes one
    column per function, in that order, into each completions file (trainer_state.json sorts its
    keys). A function without a column keeps the sorted order, unknown."""
    for _, path in files[:1]:
        limits.require_regular(path)  # pyarrow would wait on a FIFO for good
        try:
            columns = pq.read_schema(path).names
        except Exception:  # noqa: BLE001 - read_completions names the file's problem later
            break
        if set(fns) <= set(columns):
            return [c for c in columns if c in fns], True
    return fns, len(fns) <= 1


def run_weights(source: Path, fns: list[str], given: dict[str, float], history: list[dict[str, Any]],
                terms: dict[int, dict[str, float]], confirm, *, recorded: list[float] | None = None,
                ordered: bool = True, recorded_in: Path | None = None) -> dict[str, float]:
    """The reward weights: --reward-weights when given (for exactly the run's functions); else as the
    folder's GRPOConfig records them (`recorded`, reward_funcs order; trl_args.py); else read back
    from the logged reward (importers/weights.py) and confirmed by TRL's advantages (`confirm(w)`:
    None when there are no completions to check with, then only an overdetermined fit counts);
    else a refusal naming the option."""
    example = ",".join(f"{fn}=1" for fn in fns) or "<function>=1"
    if given:
        if fns and set(given) != set(fns):
            raise SourceError(f"--reward-weights: expected a weight for each of the run's reward functions "
                              f"({', '.join(fns)}); got {', '.join(sorted(given))}")
        return {fn: given[fn] for fn in fns}
    if not fns:
        raise SourceError(f"{source}: no trainer_state.json with rewards/<function>/mean: give the reward "
                          "functions and their weights with --reward-weights name=weight,... (the reward columns "
                          "of the completions files)")
    logged = {r["step"]: r["reward"] for r in history if isinstance(r.get("reward"), (int, float))
              and not any(k.startswith("eval_") for k in r)}
    from_files = [(terms[s], float(v)) for s, v in logged.items() if s in terms]
    from_means = [({fn: _float(r.get(f"rewards/{fn}/mean")) for fn in fns}, float(r["reward"])) for r in history
                  if r.get("step") in logged and "reward" in r and not any(k.startswith("eval_") for k in r)]
    if recorded is not None:
        found = weights.assign_recorded(fns, recorded, ordered, from_files or from_means)
        if found is None:
            raise SourceError(f"{recorded_in}: reward_weights {recorded} are recorded, but which function each "
                              f"belongs to is not (no completions file, and the logged rewards fit several "
                              f"orders): give them, e.g. --reward-weights {example}")
        return found
    found = None
    for equations in (from_files, from_means):
        fitted = weights.fit(fns, equations)
        verdict = None if fitted is None else confirm(fitted)
        if fitted is not None and (verdict or (verdict is None and len(equations) > len(fns))
                                   or (len(fns) == 1 and verdict is not False)):
            found = fitted
            break
    if found is None:
        raise SourceError(f"{source}: the reward weights cannot be read back from the logged reward (too few "
                          f"logged steps, or a reward aggregation other than TRL's weighted sum): give them, e.g. "
                          f"--reward-weights {example}")
    return found


def _float(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def read_completions(path: Path):
    limits.require_regular(path)  # pyarrow would wait on a FIFO for good
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


def write_step(writer, path: Path, df, *, step: int, group_size: int, fn_names: list[str],
               weights: dict[str, float], kinds: dict[str, str], tools: bool = False) -> None:
    """One kept completions file as samples rows; tools: the run used tools (every row gets turns)."""
    n = len(df) - len(df) % group_size
    if n == 0:
        return
    df = df.iloc[len(df) - n:]
    prompts, completions, per_fn, advantage = checked(path, df, fn_names)
    for start in range(0, n, group_size):
        if len(set(prompts[start:start + group_size])) > 1:
            raise SourceError(f"{path}: rows {start}-{start + group_size - 1}: expected a block of {group_size} "
                              "completions of one prompt (TRL's order); pass the run's --group-size (num_generations)")
    skip = {*REQUIRED, *fn_names, "image", "images"}
    logged = [c for c in df.columns if c not in skip]
    if len(logged) > limits.MAX_EXTRAS or any(len(str(c)) > limits.MAX_NAME_CHARS for c in logged):
        raise SourceError(f"{path}: at most {limits.MAX_EXTRAS} log_extra columns with names of at most "
                          f"{limits.MAX_NAME_CHARS} characters")
    logged_values = {str(c): [limits.extra(_plain(v), f"{path}: row {i}", f"log_extra {c}")  # as verl's extras
                              for i, v in enumerate(df[c].tolist())] for c in logged}
    extra = samples.extra_columns(logged_values, kinds)
    group, sample_idx = samples.blocks(n, group_size)
    cols = samples.columns(
        step=step, group=group, sample_idx=sample_idx, prompt=prompts, completion=completions,
        reward=samples.weighted_total(per_fn, weights), advantage=advantage, per_fn=per_fn, extra=extra)
    cols.update(reward_call(path, df))
    if tools:
        cols.update(turns.columns(df["completion"].tolist(), str(path)))
    writer.log("samples", cols)
    writer.flush()


def reward_call(path: Path, df) -> dict:
    """`source_prompt` and `source_completion`: the prompt and completion as TRL handed them to its rewards
    (module docstring). Their text is within the limit already (`checked`); as JSON, with quotes, escapes
    and message fields, each is held to twice that."""
    cols = samples.reward_call_columns([as_logged(v) for v in df["prompt"]], [as_logged(v) for v in df["completion"]])
    for name, values in cols.items():
        for i, value in enumerate(values.to_pylist()):
            if len(value) > 2 * limits.MAX_TEXT_CHARS:
                raise SourceError(f"{path}: row {i}: {name.removeprefix('source_')} has {len(value):,} characters "
                                  f"as JSON; at most {2 * limits.MAX_TEXT_CHARS:,} are imported")
    return cols


def as_logged(value: Any) -> Any:
    """A prompt or completion read back from TRL's Parquet as TRL held it: lists, not numpy arrays, and
    a message without the null fields Parquet gives it for other messages' keys.

    >>> import numpy as np
    >>> as_logged(np.array([{"role": "assistant", "content": "4", "tool_calls": None}]))
    [{'role': 'assistant', 'content': '4'}]
    """
    value = turns.plain(value)
    if isinstance(value, list) and all(isinstance(m, dict) for m in value):
        return [{k: v for k, v in m.items() if v is not None} for m in value]
    return value


def checked(path: Path, df, fn_names: list[str]):
    """prompts, completions, {fn: scores} and advantages of a completions table, each value within
    importers/limits.py (row numbers count from 0, as pandas shows them)."""
    missing = [fn for fn in fn_names if fn not in df]
    if missing:
        raise SourceError(f"{path}: expected a column for each reward function; missing {', '.join(missing)}")
    prompts = [limits.text(samples.text(p), f"{path}: row {i}", "prompt") for i, p in enumerate(df["prompt"])]
    completions = [limits.text(samples.text(c), f"{path}: row {i}", "completion")
                   for i, c in enumerate(df["completion"])]
    per_fn = {fn: [_reward(v, f"{path}: row {i}", fn) for i, v in enumerate(df[fn])] for fn in fn_names}
    advantage = [limits.number(_plain(a), f"{path}: row {i}", "advantage") for i, a in enumerate(df["advantage"])]
    return prompts, completions, per_fn, advantage


def _plain(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") else value  # a numpy scalar (or array) as Python's


def _reward(value: Any, where: str, fn: str) -> float:
    """A function's score: NaN (TRL's None: not scored) passes, anything else must be a finite number."""
    value = _plain(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return math.nan
    return limits.number(value, where, fn)


def model_name(source: Path) -> str:
    """The saved model's config.json (`_name_or_path`, else its architecture), in the folder or its
    latest checkpoint; "unknown" when there is none."""
    for folder in (source, *latest_checkpoints(source)):
        path = folder / "config.json"
        if not path.is_file():
            continue
        try:
            with limits.open_regular(path) as fh:
                config = json.loads(fh.read(1 << 20).decode("utf-8"))
            name = config.get("_name_or_path") or (config.get("architectures") or [None])[0]
        except (SourceError, ValueError, RecursionError, AttributeError, TypeError, IndexError):
            continue
        if isinstance(name, str) and name:
            return name[:200]
    return "unknown"
