"""Benchmarks as sweeps: variants x seeds launched through grpo_lab.launching.sweep, reported with the
statistics of grpo_lab/rundir/variants.py (one source: the Compare page shows the same numbers).

A bench names its variants (label -> trainer options on a shared base); every run is a sweep run,
so its config.json carries `sweep`, `variant` and `seed`, and `/compare?sweep=NAME` in the dashboard
draws the same comparison with bands. The report per variant: n seeds, mean and 95% t-interval of
each per-run metric (variants.METRICS, plus a bench's own extra columns), the IQM of the final
reward; per pair against the first variant: the difference with Welch's 95% interval and the
sentence variants.verdict writes.

Used by bench_ppo_vs_grpo.py and bench_variants.py; the formatters are pure (tests/test_bench_sweep_stats.py).
"""

from __future__ import annotations

import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grpo_lab.launching import sweep  # noqa: E402
from grpo_lab.launching import launch_queue, process_control  # noqa: E402
from grpo_lab.rundir import variants  # noqa: E402
from grpo_lab.rundir.query import query  # noqa: E402
from grpo_lab.rundir.status import ACTIVE_STATES  # noqa: E402

# the per-run metrics a bench reports (variants.per_run's names); steps to threshold is left out:
# on the demo every seed reaches 0.5 within a few steps, so it tells the variants apart by noise
REPORTED = ("final reward", "best reward", "reward AUC", "final KL")
# An extra per-run column: (name, function of the run's scalars frame -> one float).
Extra = tuple[str, Callable[[pd.DataFrame], float]]


def plan_variants(name: str, base: dict[str, Any], options: dict[str, dict[str, Any]],
                  seeds: list[int]) -> list[sweep.PlannedRun]:
    """Every run of a sweep whose variants are named option sets (a grid is a cross product of
    single keys; PPO with G = 1 next to GRPO with G = 8 is not one). Names and labels as a sweep's.

    >>> [(r.name, r.variant, r.values["group_size"]) for r in plan_variants("b", {"max_steps": 5},
    ...  {"grpo": {"group_size": 8}, "ppo-1": {"algo": "ppo", "group_size": 1}}, [0, 1])]
    [('b-grpo-s0', 'grpo', 8), ('b-grpo-s1', 'grpo', 8), ('b-ppo-1-s0', 'ppo-1', 1), ('b-ppo-1-s1', 'ppo-1', 1)]
    """
    runs = []
    for label, opts in options.items():
        for r in sweep.plan(name, {**base, **opts}, [], seeds):  # checks the name and the size bound
            run = sweep.run_name(name, label, r.seed)
            runs.append(sweep.PlannedRun(name=run, variant=label, seed=r.seed,
                                         values={**r.values, "variant": label, "name": run}))
    return runs


def launch_and_wait(runs: list[sweep.PlannedRun], runs_dir: Path, max_runs: int, threads: int | None,
                    retrain_unfinished: bool = False, poll: float = 2.0) -> None:
    """Check every run, queue the sweep and block until all have ended (the launch queue of
    grpo-lab-sweep, `max_runs` at once); exits naming the runs that did not finish. With
    `retrain_unfinished`, the sweep's finished runs in runs_dir are kept and every other run of it
    (stopped, failed, missing) is deleted and trained again from the start, with today's options."""
    os.environ[launch_queue.MAX_RUNS_ENV] = str(max_runs)  # the launcher reads it; its trainers inherit our environment
    if threads:
        os.environ["OMP_NUM_THREADS"] = str(threads)
    todo = runs
    if retrain_unfinished:
        todo = [r for r in runs if sweep.run_state(runs_dir, r.name)[0] != "finished"]
        for r in todo:
            state = sweep.run_state(runs_dir, r.name)[0]
            if state in (*ACTIVE_STATES, "launching", "queued"):
                sys.exit(f"error: {r.name} is still {state}; wait for it to end")
            shutil.rmtree(runs_dir / r.name, ignore_errors=True)
            process_control.dismiss(runs_dir, r.name)
        print(f"{len(runs) - len(todo)} finished runs kept, {len(todo)} to train", file=sys.stderr)
    try:
        sweep.check_all(todo, runs_dir)
        if not retrain_unfinished and (taken := sweep.existing(runs_dir, runs[0].values["sweep"], runs)):
            raise sweep.SweepError(f"runs-dir: {runs_dir} already holds this sweep ({taken[0]}); add --reuse to "
                                   "report from it, --retrain-unfinished to train only what did not finish, or "
                                   "give another --runs-dir")
    except sweep.SweepError as exc:
        sys.exit(f"error: {exc}")
    runs_dir.mkdir(parents=True, exist_ok=True)
    held = sweep.start(todo, runs_dir, resume=False)
    failed = sweep.wait(runs, runs_dir, held, poll)
    if failed:
        sys.exit(f"error: {len(failed)} of {len(runs)} runs did not finish: {', '.join(failed)} "
                 f"(logs in {runs_dir}/.launcher/)")


def scalars(run_dir: Path) -> pd.DataFrame:
    """A run's scalars table, every column, by step (read as the dashboard reads it)."""
    df, problems = query(run_dir, "scalars", "SELECT * FROM {src} ORDER BY step")
    if df.empty:
        sys.exit(f"error: {run_dir}: no scalars ({'; '.join(problems) or 'not trained yet?'})")
    return df


def per_run_table(frames: dict[str, pd.DataFrame], extras: list[Extra] = ()) -> pd.DataFrame:
    """variants.per_run over each run's reward/mean and kl/mean, plus the extra columns.

    >>> f = pd.DataFrame({"step": [1, 2], "reward/mean": [0.2, 0.6], "kl/mean": [0.0, 0.1]})
    >>> [float(v) for v in per_run_table({"a": f}, [("steps", len)]).iloc[0][["final reward", "final KL", "steps"]]]
    [0.6, 0.1, 2.0]
    """
    def long(column: str) -> pd.DataFrame:
        parts = [pd.DataFrame({"run": name, "step": df["step"],
                               "value": df[column] if column in df else math.nan}) for name, df in frames.items()]
        return pd.concat(parts, ignore_index=True)

    out = variants.per_run(long("reward/mean"), long("kl/mean"))
    for column, fn in extras:
        out[column] = [float(fn(frames[name])) for name in out["run"]]
    return out


def ci_cell(mean: float, low: float, high: float, digits: int = 3) -> str:
    """`mean [low, high]`; without an interval (one seed) the mean alone.

    >>> ci_cell(0.9071, 0.88, 0.93), ci_cell(2.0, math.nan, math.nan, 1), ci_cell(math.nan, math.nan, math.nan)
    ('0.907 [0.880, 0.930]', '2.0', '–')
    """
    if not math.isfinite(mean):
        return "–"
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def summary_markdown(runs: pd.DataFrame, groups: dict[str, list[str]], metrics: list[str],
                     digits: dict[str, int] | None = None) -> str:
    """One row per variant: n seeds, each metric's mean [95% CI] (variants.mean_ci), and the IQM
    of the first metric (variants.iqm). `runs` has a column `run` and one per metric.

    >>> runs = pd.DataFrame({"run": ["a", "b", "c"], "final reward": [0.5, 0.7, 0.6]})
    >>> print(summary_markdown(runs, {"grpo": ["a", "b", "c"]}, ["final reward"]))
    | variant | n | final reward mean [95% CI] | final reward IQM |
    |---|---|---|---|
    | grpo | 3 | 0.600 [0.352, 0.848] | 0.600 |
    """
    digits = digits or {}
    head = ["variant", "n", *(f"{m} mean [95% CI]" for m in metrics), f"{metrics[0]} IQM"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, names in groups.items():
        part = runs[runs["run"].isin(names)]
        cells = [label, str(variants.mean_ci(part[metrics[0]])[3])]
        for m in metrics:
            mean, low, high, _ = variants.mean_ci(part[m])
            cells.append(ci_cell(mean, low, high, digits.get(m, 3)))
        cells.append(f"{variants.iqm(part[metrics[0]]):.{digits.get(metrics[0], 3)}f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def differences_markdown(runs: pd.DataFrame, groups: dict[str, list[str]], metrics: list[str],
                         baseline: str) -> str:
    """Every other variant against `baseline`, per metric: the difference (other - baseline) with
    Welch's 95% interval and variants.verdict's sentence.

    >>> runs = pd.DataFrame({"run": list("abcdef"), "final reward": [0.1, 0.2, 0.15, 0.4, 0.5, 0.45]})
    >>> print(differences_markdown(runs, {"x": ["a", "b", "c"], "y": ["d", "e", "f"]}, ["final reward"], "x"))
    | comparison | metric | difference [95% CI] | verdict |
    |---|---|---|---|
    | y − x | final reward | +0.300 [+0.187, +0.413] | y is higher than x in final reward by 0.3 [0.187, 0.413] (95% CI, 3 and 3 seeds). |
    """
    lines = ["| comparison | metric | difference [95% CI] | verdict |", "|---|---|---|---|"]
    base = runs[runs["run"].isin(groups[baseline])]
    for label, names in groups.items():
        if label == baseline:
            continue
        other = runs[runs["run"].isin(names)]
        for m in metrics:
            d = variants.difference(base[m], other[m])
            cell = (f"{d['diff']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]" if math.isfinite(d["low"])
                    else ("–" if not math.isfinite(d["diff"]) else f"{d['diff']:+.3f}"))
            lines.append(f"| {label} − {baseline} | {m} | {cell} | {variants.verdict(d, baseline, label, m)} |")
    return "\n".join(lines)


def report(runs_dir: Path, runs: list[sweep.PlannedRun], extras: list[Extra] = (),
           digits: dict[str, int] | None = None) -> tuple[str, pd.DataFrame]:
    """The markdown report of a finished sweep (summary, then differences against the first
    variant) and its per-run table."""
    missing = [r.name for r in runs if not (runs_dir / r.name / "config.json").is_file()]
    if missing:
        sys.exit(f"error: runs-dir: {runs_dir} has no run {missing[0]} ({len(missing)} missing); run without --reuse")
    frames = {r.name: scalars(runs_dir / r.name) for r in runs}
    table = per_run_table(frames, list(extras))
    table["variant"] = table["run"].map({r.name: r.variant for r in runs})
    groups: dict[str, list[str]] = {}
    for r in runs:
        groups.setdefault(r.variant, []).append(r.name)
    metrics = [*REPORTED, *(name for name, _ in extras)]
    text = (summary_markdown(table, groups, metrics, digits) + "\n\n"
            + differences_markdown(table, groups, list(REPORTED[:1]) + ["reward AUC"], next(iter(groups))))
    return text, table
