"""Re-score a run: the completions it already has, scored with other rewards or weights, no training.

    grpo-lab-rescore runs/demo --rewards correctness=1,length=0.1
    grpo-lab-rescore runs/demo --rewards correctness,format --reward-weights 1,0.5 --name strict

"Is my reward scoring what I think?" is answered on the completions a run already sampled: each step's
completions go to the rewards in one call, as the trainer calls them (the same build, keywords,
trainer_state, None rule and weighted sum: grpo_lab/rewards/combine.py), and the totals give the
advantages `objective.functions.group_advantages` gives under the run's own rule (`advantage_rule`:
its `std_mode`, and where the source trainer's differs from the chapter's, its epsilon, batch std and
float precision), step by step (std_mode batch: over the step's trained groups, as the trainer did).
The run's files are not
touched; the result is one folder, `RUN/rescores/<name>/` (docs/run-directory.md; written and read
back by grpo_lab/rundir/rescores.py):

    samples.parquet   one row per completion: the new rewards and advantages beside the run's
    summary.json      what changed: rewards, advantage signs, groups that gain or lose signal

written under a temporary name and renamed into place. Rescoring with the run's own rewards gives
back its `reward` and `advantage` columns exactly (tests/finished_runs/test_rescore.py), a TRL run's to 1e-6
(tests/finished_runs/test_rescore_trl_faithful.py).

What a reward reads is what the run logged. Where the run kept its trainer's reward call (a TRL run
written by the callback: `source_prompt`, `source_completion`, `source_completion_ids` and the dataset's
columns `column/<name>`, docs/run-directory.md), the rewards get exactly that: the prompt and
completion as TRL passed them (the message lists of a conversational dataset, so `completion[0]["content"]`
works), the completion ids, and each dataset column as its keyword (`solution`, ...). An import of TRL's
output folder kept the prompts and completions but no columns. Elsewhere: `prompts` the prompt as the
model saw it, `completions` the completion text, the column `answer` (also as `solution` in a TRL run,
`ground_truth` in a verl run, the names their rewards read), and in a tool run `tool_calls` from its
turns; a conversational dataset's prompt is then passed as its rendered text.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import numpy as np
import pandas as pd

from grpo_lab import rewards
from grpo_lab.objective.options import STD_MODES
from grpo_lab.rewards.registry import READS_COLUMN
from grpo_lab.rundir import json_file, rescores
from grpo_lab.rundir.importers.samples import COLUMN_PREFIX, SOURCE_COMPLETION, SOURCE_COMPLETION_IDS, SOURCE_PROMPT
from grpo_lab.rundir.layout import valid_run_name
from grpo_lab.rundir.query import query
from grpo_lab.rundir.reader import open_regular
from grpo_lab.trainer.data import ANSWER_ALIASES

PARAMS_DEPTH = 8  # --reward-params nests 2 levels (reward -> parameter); a list or mapping value a few more
EXAMPLES = 100  # (step, group) pairs the summary lists for each kind of change
CHANGED_TOL = 1e-6  # a reward that moved less (relative) only lost float digits (an import's float64 vs float32)
READ_COLUMNS = ("step", "group", "sample_idx", "prompt_id", "prompt", "completion", "answer", "reward",
                "advantage", "dropped", "turns", SOURCE_PROMPT, SOURCE_COMPLETION, SOURCE_COMPLETION_IDS)
CALL_DEPTH = 64  # a logged prompt, completion or column value: JSON nested at most this deep (the runs folder's reader)


class RescoreError(ValueError):
    """Input a rescore cannot take: one line naming the option and what is allowed."""


@dataclass(frozen=True)
class Request:
    """What to score with: reward names and weights, their parameters, and the folder's name."""

    rewards: dict[str, float]
    reward_params: dict[str, dict]
    spec: str  # --rewards as given
    name: str

    def launch_values(self) -> dict:
        """What the dashboard's launch check (allowed.check_launch) reads: the rewards and every
        parameter they will be built with (the run's own merged with the form's)."""
        return {"rewards": self.rewards, "reward_params": self.reward_params}


@dataclass
class Result:
    path: Path
    summary: dict
    samples: pd.DataFrame = field(repr=False)


# --- the request: the trainer's validation -----------------------------------------------------


def parse_request(spec: str, weights: str | None = None, params: str | dict | None = None, name: str | None = None,
                  run_config: dict | None = None) -> Request:
    """--rewards as grpo-lab-train takes it ('correctness=1,length=0.1'); --reward-weights, when
    given, one weight per named reward in order (TRL's reward_weights); --reward-params a JSON
    mapping over the run's own reward_params (so its own rewards score as they did in training).
    The trainer's Config validates them, so a weight it refuses is refused here in its words."""
    from grpo_lab.trainer.config import ConfigError, from_dict  # noqa: PLC0415 - light, but not needed to read

    try:
        names = from_dict({"rewards": spec}).rewards
        if weights is not None:
            values = [w.strip() for w in str(weights).split(",") if w.strip()]
            if len(values) != len(names):
                raise RescoreError(f"--reward-weights: give one weight per reward ({len(names)}: {', '.join(names)}), "
                                   f"got {len(values)}")
            try:
                names = dict(zip(names, (float(v) for v in values)))
            except ValueError:
                raise RescoreError(f"--reward-weights: weights must be numbers, got {weights!r}") from None
        given = _params(params)
        own = (run_config or {}).get("reward_params") or {}
        merged = {n: {**(own[n] if isinstance(own.get(n), dict) else {}), **given.get(n, {})} for n in names}
        cfg = from_dict({"rewards": names, "reward_params": {n: p for n, p in merged.items() if p}})
    except ConfigError as exc:
        raise RescoreError(str(exc)) from None
    name = name or default_name(spec if weights is None else f"{spec}-{weights}")
    if not valid_run_name(name):
        raise RescoreError(f"--name: {name!r:.80}: use 1-100 letters, digits, '.', '_', '-' (starting with a letter or "
                           "digit, no '..')")
    return Request(rewards=dict(cfg.rewards), reward_params=dict(cfg.reward_params), spec=spec, name=name)


def _params(params: str | dict | None) -> dict[str, dict]:
    if params is None or params == "":
        return {}
    if isinstance(params, str):
        try:  # the runs folder's JSON reader: a 60,000-deep value is one line, not a RecursionError
            params = json_file.parse(params, "--reward-params", PARAMS_DEPTH)
        except json_file.JsonFileError as exc:
            raise RescoreError(str(exc)) from None
    if not isinstance(params, dict) or not all(isinstance(v, dict) for v in params.values()):
        raise RescoreError("--reward-params: a JSON mapping of reward names to mappings of parameters, "
                           'e.g. {"length": {"max_len": 8}}')
    return params


def default_name(spec: str) -> str:
    """A folder name from the spec: 'correctness=1,length=0.1' -> 'correctness-1-length-0.1'.

    >>> default_name("correctness=1,length=0.1"), default_name("my.mod:fn")
    ('correctness-1-length-0.1', 'my.mod-fn')
    """
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", spec).strip("-.")[:80].strip("-.")
    slug = re.sub(r"\.\.+", ".", slug)
    return slug if valid_run_name(slug) else "rescore"


def build_rewards(request: Request) -> dict[str, tuple[Callable, float]]:
    """The rewards, built as the trainer builds them (trainer.setup.build_rewards: same errors)."""
    from grpo_lab.trainer.config import ConfigError, from_dict  # noqa: PLC0415
    from grpo_lab.trainer.setup import build_rewards as trainer_build  # noqa: PLC0415 - torch: only to score

    try:
        return trainer_build(from_dict({"rewards": request.rewards, "reward_params": request.reward_params}))
    except ConfigError as exc:
        raise RescoreError(str(exc)) from None


# --- reading the run ---------------------------------------------------------------------------


def read_samples(run_dir: Path) -> pd.DataFrame:
    """The run's completions, ordered as the trainer scored them (step, group, sample_idx)."""
    from grpo_lab.rundir.query import usable_parts  # noqa: PLC0415

    files, problems, _, _ = usable_parts(run_dir, "samples")
    if not files:
        raise RescoreError(f"run {run_dir.name}: no completions to score ({'; '.join(problems) or 'no samples table'})")
    names = set(query(run_dir, "samples", "SELECT * FROM {src} LIMIT 0")[0].columns)
    if "completion" not in names:
        raise RescoreError(f"run {run_dir.name}: its samples table has no completion column, nothing to score")
    picked = ", ".join(f'"{c}"' for c in [*READ_COLUMNS, *sorted(n for n in names if n.startswith(COLUMN_PREFIX))]
                       if c in names)
    rows, problems = query(run_dir, "samples", f'SELECT {picked} FROM {{src}} ORDER BY step, "group", sample_idx')
    rows = rows[rows["completion"].notna()].reset_index(drop=True) if not rows.empty else rows
    if rows.empty:
        raise RescoreError(f"run {run_dir.name}: no completions to score ({'; '.join(problems) or 'the samples are empty'})")
    for column in ("prompt", "prompt_id", "answer", "reward", "advantage", "dropped", "turns", SOURCE_PROMPT,
                   SOURCE_COMPLETION, SOURCE_COMPLETION_IDS):
        if column not in rows:
            rows[column] = None
    rows["dropped"] = rows["dropped"].fillna(False).astype(bool)
    return rows


def reward_inputs(rows: pd.DataFrame, config: dict) -> tuple[list, list, dict]:
    """(prompts, completions, columns) of one step's rows, as the trainer hands them to rewards
    (trainer.scoring.reward_inputs) from what the run logged (module docstring): the trainer's own
    call where every row kept it (`recorded_call`), else rebuilt from the text columns."""
    recorded = recorded_call(rows)
    if recorded is not None:
        return recorded
    columns: dict[str, list] = {}
    answers = [None if _missing(a) else a for a in rows["answer"]]
    if any(a is not None for a in answers):
        columns["answer"] = answers
        alias = ANSWER_ALIASES.get(str(config.get("source") or ""))
        if alias:
            columns[alias] = answers
    turns = [None if _missing(t) else t for t in rows["turns"]]
    if any(t is not None for t in turns):
        columns["tool_calls"] = [tool_calls(t, config) for t in turns]
    return rows["prompt"].fillna("").astype(str).tolist(), rows["completion"].astype(str).tolist(), columns


def recorded_call(rows: pd.DataFrame) -> tuple[list, list, dict] | None:
    """(prompts, completions, columns) as the source trainer handed them to its rewards, from the
    `source_prompt`, `source_completion` and `column/<name>` columns (JSON, importers/samples.py
    reward_call_columns); None when a row of these lacks them (a run that did not keep the call).
    A column kept for only some rows is not a keyword of this call."""
    if not _kept(rows, SOURCE_PROMPT) or not _kept(rows, SOURCE_COMPLETION):
        return None
    columns = {name[len(COLUMN_PREFIX):]: _parsed(rows[name], name) for name in rows.columns
               if name.startswith(COLUMN_PREFIX) and _kept(rows, name)}
    return _parsed(rows[SOURCE_PROMPT], SOURCE_PROMPT), _parsed(rows[SOURCE_COMPLETION], SOURCE_COMPLETION), columns


def completion_ids(rows: pd.DataFrame) -> list[list[int]] | None:
    """The completions' token ids as the source trainer handed them to its rewards (`completion_ids`),
    where every row kept them; else None (what the trainer of a run without them passes is not known here)."""
    return _parsed(rows[SOURCE_COMPLETION_IDS], SOURCE_COMPLETION_IDS) if _kept(rows, SOURCE_COMPLETION_IDS) else None


def _kept(rows: pd.DataFrame, column: str) -> bool:
    """Every row has a value in `column` (JSON text; null: the run did not keep it there)."""
    return column in rows and not rows.empty and bool(rows[column].notna().all())


def _parsed(values: pd.Series, name: str) -> list:
    """Each JSON text of a logged column, read as the runs folder reads JSON (depth-limited); a value
    that is not is one line naming the column."""
    try:
        return [json_file.parse(v, f"samples column {name}", CALL_DEPTH) for v in values]
    except json_file.JsonFileError as exc:
        raise RescoreError(str(exc)) from None


def logged_columns(rows: pd.DataFrame, config: dict) -> list[str]:
    """The column keywords reward_inputs gives the rewards of this run (some step logged each)."""
    if SOURCE_PROMPT in rows and rows[SOURCE_PROMPT].notna().any():  # the trainer's own call: the columns it kept
        return [n[len(COLUMN_PREFIX):] for n in rows.columns if n.startswith(COLUMN_PREFIX) and rows[n].notna().any()]
    names = ["answer", *([ANSWER_ALIASES[config["source"]]] if config.get("source") in ANSWER_ALIASES else [])]
    return [*(names if rows["answer"].notna().any() else []), *(["tool_calls"] if rows["turns"].notna().any() else [])]


def tool_calls(turns_json: str | None, config: dict) -> list[dict]:
    """A completion's calls (the `tool_calls` keyword) from its logged turns; a built-in tool's tag
    call names its argument as the trainer does (conversation.calls)."""
    from grpo_lab.tools.registry import BUILTIN  # noqa: PLC0415
    from grpo_lab.trainer.conversation import calls, first_parameters  # noqa: PLC0415 - no torch

    try:
        turns = json_file.parse(turns_json, "turns") if turns_json else []
    except json_file.JsonFileError:  # a planted value (not JSON, too deep) reads as no calls
        return []
    named = [n.strip() for n in str(config.get("tools") or "").split(",") if n.strip() in BUILTIN]
    return calls(turns if isinstance(turns, list) else [], first_parameters({n: BUILTIN[n] for n in named}))


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def trainer_state(config: dict, prompts: int, step: int):
    """What TRL hands a reward as `trainer_state` at `step`, from the run's config
    (trainer.scoring.make_trainer_state; `prompts`: the distinct prompts the run drew)."""
    from grpo_lab.trainer.scoring import make_trainer_state  # noqa: PLC0415 - transformers

    cfg = SimpleNamespace(max_steps=int(config.get("max_steps") or step), group_size=int(config.get("group_size") or 1),
                          prompts_per_step=int(config.get("prompts_per_step") or 1))
    return make_trainer_state(cfg, prompts, step)


def check_inputs(fns: dict[str, tuple[Callable, float]], request: Request, columns: list[str]) -> None:
    """Refused before anything is scored: a reward whose signature cannot take the trainer's call
    (the dry run's check), or one that reads a column the run did not log."""
    for name, (fn, _weight) in fns.items():
        column = request.reward_params.get(name, {}).get("column", READS_COLUMN.get(name))
        if column and column not in columns:
            raise RescoreError(f"rewards: {name} reads the {column!r} column, which this run's samples do not hold")
        keywords = ["prompts", "completions", "completion_ids", *columns, "trainer_state", "log_extra", "log_metric"]
        problem = rewards.call_problem(fn, keywords)
        if problem and rewards.call_problem(fn, ["prompts", "completions"], keywords[2:]) is not None:
            raise RescoreError(f"rewards: reward {name!r} cannot take the trainer's call (TRL's): {problem}")


# --- advantages -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AdvantageRule:
    """How the run's trainer made advantages from rewards: `group_advantages`' arguments."""

    std_mode: str = "group"
    epsilon: float = 0.0  # divide by std + epsilon (TRL: 1e-4); 0: the chapter's std alone
    batch_ddof: int = 0  # std_mode batch: the batch's N-1 std (TRL) or population std (ours)
    dtype: str = "float64"  # what the arithmetic runs in: TRL's float32, or ours

    def as_dict(self) -> dict:
        return {"std_mode": self.std_mode, "epsilon": self.epsilon, "batch_ddof": self.batch_ddof,
                "dtype": self.dtype}


MAX_EPSILON = 1.0  # an advantage_epsilon above this is not a trainer's rule but a planted value


def advantage_rule(config: dict, run: str = "RUN") -> AdvantageRule:
    """The run's own rule, from its config.json: `std_mode`; `advantage_epsilon` (TRL's 1e-4, which the
    callback and the importer record); a TRL run's batch std is N-1 (TRL's `nanstd`,
    scale_rewards="batch") and its arithmetic float32. Anything else there is one line naming the field.

    >>> advantage_rule({"std_mode": "sample", "source": "trl", "advantage_epsilon": 1e-4})
    AdvantageRule(std_mode='sample', epsilon=0.0001, batch_ddof=1, dtype='float32')
    >>> advantage_rule({})
    AdvantageRule(std_mode='group', epsilon=0.0, batch_ddof=0, dtype='float64')
    """
    std_mode = str(config.get("std_mode") or "group")
    if std_mode not in STD_MODES:
        raise RescoreError(f"run {run}: std_mode {std_mode!r} in its config.json is not one of {', '.join(STD_MODES)}")
    epsilon = config.get("advantage_epsilon", 0.0)
    if (isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not math.isfinite(epsilon)
            or not 0 <= epsilon <= MAX_EPSILON):
        raise RescoreError(f"run {run}: advantage_epsilon {epsilon!r} in its config.json is not a number from 0 to "
                           f"{MAX_EPSILON:g}")
    trl = config.get("source") == "trl"
    return AdvantageRule(std_mode, float(epsilon), 1 if trl else 0, "float32" if trl else "float64")


def step_advantages(rows: pd.DataFrame, totals: np.ndarray, rule: AdvantageRule | str
                    ) -> tuple[np.ndarray, dict[int, bool]]:
    """(advantage per row, zero spread per group) of one step's rows, given their total rewards.

    The trainer's call: `group_advantages` of the (N, G) rewards of the groups it trained on
    together, NaN for no score, with the run's rule (`advantage_rule`; a std_mode alone: the
    chapter's rule with it). Dynamic sampling's dropped groups were never in that batch: they
    are a batch of their own here (in the run, their rewards were all equal, so advantage 0)."""
    import torch  # noqa: PLC0415

    from grpo_lab.objective.functions import group_advantages  # noqa: PLC0415

    rule = AdvantageRule(rule) if isinstance(rule, str) else rule
    out, zero = np.zeros(len(rows)), {}
    for part in (~rows["dropped"].to_numpy(), rows["dropped"].to_numpy()):
        if not part.any():
            continue
        groups = rows["group"].to_numpy()[part]
        index = {g: i for i, g in enumerate(sorted(set(groups.tolist())))}
        gi = np.array([index[g] for g in groups.tolist()])
        si = rows["sample_idx"].to_numpy()[part].astype(int)
        matrix = np.full((len(index), int(si.max()) + 1), np.nan)  # a verl group may be smaller: NaN pads it
        matrix[gi, si] = totals[part].astype(np.float32)  # the trainer's totals are a float32 tensor
        result = group_advantages(torch.from_numpy(matrix), rule.std_mode, epsilon=rule.epsilon,
                                  batch_ddof=rule.batch_ddof, dtype=getattr(torch, rule.dtype))
        out[part] = result.advantages.numpy()[gi, si]
        zero.update({g: bool(result.zero_std[i]) for g, i in index.items()})
    return out, zero


def _totals(values) -> np.ndarray:
    return np.array([np.nan if _missing(v) else float(v) for v in values], dtype=np.float64)


# --- the rescore -------------------------------------------------------------------------------


def rescore(run_dir: str | Path, request: Request, *, force: bool = False,
            log: Callable[[str], None] = lambda line: None) -> Result:
    """Score the run's completions with `request` and write RUN/rescores/<name>/; RescoreError
    (one line, nothing written) on bad input."""
    run_dir = Path(run_dir)
    config = _run_config(run_dir)
    rule = advantage_rule(config, run_dir.name)
    if config.get("trl/multi_objective_aggregation") == "normalize_then_sum":
        log(f"run {run_dir.name}: TRL normalised each reward before summing (normalize_then_sum); the advantages "
            "here are recomputed from the totals, as its default sum_then_normalize does")
    try:  # RUN/rescores a symlink out of the run, or a file: refused before anything is scored
        target = rescores.folder(run_dir) / request.name
    except rescores.WriteError as exc:
        raise RescoreError(str(exc)) from None
    if target.exists() and not force:
        raise RescoreError(f"--name: {rescores.RESCORES}/{request.name} exists in run {run_dir.name}; pick another --name or "
                           "pass --force to replace it")
    rows = read_samples(run_dir)
    fns = build_rewards(request)
    check_inputs(fns, request, logged_columns(rows, config))
    start, prompts = time.time(), int(rows["prompt_id"].nunique())
    per_reward = {name: np.full(len(rows), np.nan) for name in fns}
    total, advantage = np.full(len(rows), np.nan), np.zeros(len(rows))
    run_total, run_adv = _totals(rows["reward"]), np.zeros(len(rows))
    zero_before, zero_after, errors, first_error = {}, {}, dict.fromkeys(fns, 0), {}
    for step, at in rows.groupby("step", sort=True).indices.items():
        part = rows.iloc[at]
        prompts_in, completions, columns = reward_inputs(part, config)
        scores = rewards.score_all(fns, prompts_in, completions, columns, completion_ids=completion_ids(part),
                                   trainer_state=trainer_state(config, prompts, int(step)))
        for line in scores.messages:
            log(f"step {step}: {line}")
        for name, values in scores.per_reward.items():
            per_reward[name][at] = _totals(values)
        for name, n in scores.errors.items():
            errors[name] += n
        for name, message in scores.first_error.items():
            first_error.setdefault(name, message)
        total[at] = _totals(scores.total).astype(np.float32)  # as the trainer's totals tensor rounds them
        advantage[at], after = step_advantages(part, total[at], rule)
        run_adv[at], before = step_advantages(part, run_total[at], rule)
        zero_after.update({(int(step), int(g)): z for g, z in after.items()})
        zero_before.update({(int(step), int(g)): z for g, z in before.items()})
    table = pd.DataFrame({
        "step": rows["step"].astype("int64"), "group": rows["group"].astype("int64"),
        "sample_idx": rows["sample_idx"].astype("int64"), "prompt_id": rows["prompt_id"].astype(str),
        "reward": _nullable(total), "advantage": advantage,
        **{f"rewards/{name}": _nullable(values) for name, values in per_reward.items()},
        "run_reward": _nullable(run_total), "run_advantage": pd.to_numeric(rows["advantage"], errors="coerce")})
    table["reward_changed"] = _changed(run_total, total)
    table["sign_flipped"] = np.sign(run_adv) * np.sign(advantage) < 0
    summary = summarize(table, zero_before, zero_after, request=request, rule=rule, run=run_dir.name,
                        errors=errors, first_error=first_error, seconds=time.time() - start)
    try:
        rescores.write(run_dir, request.name, table, summary, force)
    except rescores.WriteError as exc:
        raise RescoreError(f"--name: {exc}") from None
    return Result(path=target, summary=summary, samples=table)


def _nullable(values: np.ndarray) -> pd.Series:
    return pd.Series(values, dtype="float64")


def _changed(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """A reward changed: it moved by more than float rounding, or gained or lost its score."""
    scored = ~np.isnan(before) & ~np.isnan(after)
    moved = np.abs(np.nan_to_num(after) - np.nan_to_num(before)) > CHANGED_TOL * np.maximum(1.0, np.abs(np.nan_to_num(before)))
    return (scored & moved) | (np.isnan(before) != np.isnan(after))


def summarize(table: pd.DataFrame, zero_before: dict, zero_after: dict, *, request: Request, rule: AdvantageRule,
              run: str, errors: dict, first_error: dict, seconds: float) -> dict:
    """summary.json: what the new rewards change (docs/run-directory.md, rescores/)."""
    keys = list(zero_after)
    flipped = table.loc[table["sign_flipped"], ["step", "group"]].drop_duplicates()
    gained = [k for k in keys if zero_before.get(k) and not zero_after[k]]
    lost = [k for k in keys if not zero_before.get(k, True) and zero_after[k]]
    examples = lambda pairs: [list(map(int, p)) for p in list(pairs)[:EXAMPLES]]  # noqa: E731
    return {
        "name": request.name, "run": run, "spec": request.spec, "rewards": request.rewards,
        "reward_params": request.reward_params, "std_mode": rule.std_mode, "advantage_rule": rule.as_dict(),
        "created_at": time.time(),
        "seconds": round(seconds, 3), "samples": int(len(table)), "groups": len(keys),
        "steps": int(table["step"].nunique()),
        "reward_changed": int(table["reward_changed"].sum()),
        "unscored": int(table["reward"].isna().sum()),
        "reward_mean": {"run": _mean(table["run_reward"]), "rescore": _mean(table["reward"])},
        "sign_flips": {"groups": int(len(flipped)), "samples": int(table["sign_flipped"].sum()),
                       "examples": examples(flipped.itertuples(index=False))},
        "signal": {"run": sum(not z for z in zero_before.values()), "rescore": sum(not z for z in zero_after.values()),
                   "gained": len(gained), "lost": len(lost), "gained_examples": examples(gained),
                   "lost_examples": examples(lost)},
        "errors": {k: int(v) for k, v in errors.items()}, "first_error": first_error,
    }


def _mean(values: pd.Series) -> float | None:
    v = pd.to_numeric(values, errors="coerce").dropna()
    return float(v.mean()) if len(v) else None


def check_named_program(request: Request, config: dict, given: str | None, run_dir: Path) -> None:
    """The interpreter code_tests would start, when the run's own config.json named it (not --reward-params):
    held to the dashboard form's rule (rewards/programs.py), before anything runs it."""
    from grpo_lab.rewards.programs import check_program, named_program  # noqa: PLC0415

    python = named_program({"reward_params": request.reward_params})
    if python is None or named_program({"reward_params": _params(given)}) is not None:
        return  # none, or typed by the person at this command line
    if (refused := check_program(python, run_dir.resolve().parent)) is not None:
        raise RescoreError(refused)


def _run_config(run_dir: Path) -> dict:
    if not run_dir.is_dir():
        raise RescoreError(f"RUN: no run directory {run_dir}")
    try:
        with open_regular(run_dir / "config.json", run_dir) as fh:
            config = json_file.parse(fh.read(json_file.MAX_BYTES + 1), "config.json")
    except json_file.JsonFileError as exc:
        raise RescoreError(f"run {run_dir.name}: {exc}") from None
    except (OSError, ValueError) as exc:
        raise RescoreError(f"run {run_dir.name}: config.json cannot be read ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0][:160] if str(exc) else 'no detail'})") from None
    if not isinstance(config, dict):
        raise RescoreError(f"run {run_dir.name}: config.json is not a mapping")
    return config


# --- command line -------------------------------------------------------------------------------


class _OneLine(argparse.ArgumentParser):
    def error(self, message: str):  # noqa: D102 - argparse's hook: a usage error is one line, exit 2
        raise RescoreError(f"{message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLine(prog="grpo-lab-rescore", description=(
        "Score the completions a run already has with other rewards or weights, without training; writes "
        "RUN/rescores/NAME/ (the run's own files are not changed)."), allow_abbrev=False)
    parser.add_argument("run", metavar="RUN", help="the run directory (e.g. runs/demo)")
    parser.add_argument("--rewards", required=True, metavar="SPEC",
                        help="as grpo-lab-train's --rewards: names (registered, or module:function) with weights, "
                             "e.g. correctness=1,length=0.1")
    parser.add_argument("--reward-weights", metavar="W,...", help="one weight per reward in --rewards, in order")
    parser.add_argument("--reward-params", metavar="JSON",
                        help='parameters per reward, over the run\'s own, e.g. \'{"length": {"max_len": 8}}\'')
    parser.add_argument("--name", help="the result's folder under RUN/rescores/ (default: from the spec)")
    parser.add_argument("--force", action="store_true", help="replace a rescore of the same name")
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        run_dir = Path(args.run)
        config = _run_config(run_dir)
        request = parse_request(args.rewards, args.reward_weights, args.reward_params, args.name, config)
        check_named_program(request, config, args.reward_params, run_dir)
        result = rescore(run_dir, request, force=args.force, log=lambda line: print(line, file=sys.stderr))
    except RescoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_summary(result))
    return 0


def format_summary(result: Result) -> str:
    s = result.summary
    mean = s["reward_mean"]
    fmt = lambda v: "none" if v is None else f"{v:.4f}"  # noqa: E731
    return "\n".join([
        f"rescored {s['samples']} completions ({s['groups']} groups, {s['steps']} steps) of run {s['run']} with "
        f"{', '.join(f'{k}={v:g}' for k, v in s['rewards'].items())} (std_mode {s['std_mode']}) in {s['seconds']:.1f} s",
        f"  rewards changed: {s['reward_changed']} samples; mean reward {fmt(mean['run'])} -> {fmt(mean['rescore'])}; "
        f"unscored {s['unscored']}",
        f"  advantage signs flipped: {s['sign_flips']['samples']} samples in {s['sign_flips']['groups']} groups",
        f"  groups with signal: {s['signal']['run']} -> {s['signal']['rescore']} (gained {s['signal']['gained']}, "
        f"lost {s['signal']['lost']})",
        *(f"  {k}: {v} failed samples ({s['first_error'].get(k, '')})" for k, v in s["errors"].items() if v),
        f"  written: {result.path}",
    ])


if __name__ == "__main__":
    sys.exit(main())
