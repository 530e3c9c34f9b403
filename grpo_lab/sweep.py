"""grpo-lab-sweep: one config, several seeds and a small grid, launched as one sweep.

    grpo-lab-sweep --name s --seeds 3 --grid beta=0,0.04 --max-steps 15 --wait

Every option the trainer takes (`--config base.yaml`, `--max-steps 15`, ...) is the sweep's shared
base, read with the trainer's own parser; `--grid KEY=V1,V2` (repeatable) crosses values on top of
it and `--seeds N` / `--seed-list 3,7,11` repeats each grid point. Each run's config.json carries
`sweep`, `variant` (its grid point as a label, `base` without a grid) and `seed`, which is how the
Compare page groups seeds into variants (grpo_lab/rundir/variants.py).

Runs go through the dashboard's on-disk launch queue (launching/launcher.py): the same checks as
the launch form, at most GRPO_LAB_MAX_RUNS training at once, the rest queued. Every run is checked
before the first one is queued, so a bad grid leaves nothing behind.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_lab.rundir.layout import SOURCES_KEY, default_runs_dir

MAX_SWEEP_RUNS = 64  # a grid larger than this is almost always a typo (one more value, one more key)
# Options a sweep sets per run (or that name the sweep itself): never part of the base nor the grid.
PER_RUN = ("name", "runs_dir", "resume", "seed", "sweep", "variant")
ENDED = ("finished", "failed", "stopped")


class SweepError(ValueError):
    """A sweep refused before anything was queued; the message is one line."""


@dataclass
class PlannedRun:
    name: str
    variant: str
    seed: int
    values: dict[str, Any]  # the trainer options of this run, as launcher.launch takes them


class _OneLineParser(argparse.ArgumentParser):
    """A usage error as one line, as the trainer's (no usage dump); exit 2."""

    def error(self, message: str):  # noqa: D102 - argparse's hook
        print(f"error: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def _parser() -> argparse.ArgumentParser:
    p = _OneLineParser(
        prog="grpo-lab-sweep", allow_abbrev=False,
        description="Launch one config with several seeds and a grid of values as one sweep. Any trainer "
                    "option (see python -m grpo_lab.trainer --help) is the shared base of every run.")
    p.add_argument("--name", required=True, help="The sweep's name; runs are named NAME-VARIANT-sSEED.")
    p.add_argument("--seeds", type=int, default=None, help="Seeds 0..N-1 for every grid point (default: 1).")
    p.add_argument("--seed-list", default=None, help="Explicit seeds, e.g. 3,7,11 (instead of --seeds).")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                   help="A trainer option and the values to try; repeat for a cross product.")
    p.add_argument("--runs-dir", default=None, help="Folder of run directories (default: $GRPO_LAB_RUNS_DIR or ./runs).")
    p.add_argument("--wait", action="store_true", help="Block until every run has ended; exit 1 if any failed.")
    p.add_argument("--resume", action="store_true", help="Continue an existing sweep: restart only its unfinished runs.")
    p.add_argument("--poll", type=float, default=2.0, help=argparse.SUPPRESS)  # seconds between checks with --wait
    return p


def seeds_of(seeds: int | None, seed_list: str | None) -> list[int]:
    """The seeds to run.

    >>> seeds_of(3, None), seeds_of(None, "3, 7,11"), seeds_of(None, None)
    ([0, 1, 2], [3, 7, 11], [0])
    """
    if seeds is not None and seed_list is not None:
        raise SweepError("seeds: give --seeds or --seed-list, not both")
    if seed_list is not None:
        try:
            out = [int(s) for s in seed_list.split(",") if s.strip()]
        except ValueError:
            raise SweepError(f"seed-list: must be whole numbers separated by commas, got {seed_list!r}") from None
        if not out or len(set(out)) != len(out):
            raise SweepError(f"seed-list: must list at least one seed, each once, got {seed_list!r}")
        return out
    if seeds is not None and seeds < 1:
        raise SweepError(f"seeds: must be >= 1, got {seeds}")
    return list(range(seeds if seeds is not None else 1))


def parse_grid(items: list[str]) -> list[tuple[str, list[str]]]:
    """`--grid` items as (option, values), keys in the trainer's spelling; refused with one line
    for a key the trainer does not have, one a sweep sets itself, or a mapping option.

    >>> parse_grid(["beta=0,0.04", "max-steps=5"])
    [('beta', ['0', '0.04']), ('max_steps', ['5'])]
    """
    from grpo_lab.trainer.config import Config

    fields = {f.name: f for f in dataclasses.fields(Config)}
    grid, seen = [], set()
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        values = [v.strip() for v in text.split(",") if v.strip()]
        if not sep or not values:
            raise SweepError(f"grid: write KEY=V1,V2, got {item!r}")
        if key not in fields:
            raise SweepError(f"grid: {key}: unknown option; see python -m grpo_lab.trainer --help")
        if key in PER_RUN:
            hint = "; use --seeds or --seed-list for seeds" if key == "seed" else ", it cannot be swept"
            raise SweepError(f"grid: {key}: set per run by the sweep{hint}")
        if fields[key].type in (dict, "dict"):  # its values hold commas themselves (correctness=1,length=0.1)
            raise SweepError(f"grid: {key}: a mapping option cannot be swept from the command line; "
                             "set it once for all runs (--rewards, --config), or run one sweep per value")
        if key in seen:
            raise SweepError(f"grid: {key}: given twice; list all its values in one --grid")
        if len(set(values)) != len(values):
            raise SweepError(f"grid: {key}: a value is listed twice in {item!r}")
        seen.add(key)
        grid.append((key, values))
    return grid


def run_name(sweep: str, variant: str, seed: int) -> str:
    """NAME-VARIANT-sSEED made a valid run name (letters, digits, '.', '_', '-'; at most 100).

    >>> run_name("s", "beta=0.04", 0), run_name("s", "beta=0,epsilon=0.2", 11)
    ('s-beta_0.04-s0', 's-beta_0_epsilon_0.2-s11')
    """
    text = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{sweep}-{variant}").replace("..", "_")
    tail = f"-s{seed}"
    return text[: 100 - len(tail)] + tail


def plan(name: str, base: dict[str, Any], grid: list[tuple[str, list[str]]], seeds: list[int]) -> list[PlannedRun]:
    """Every run of the sweep: each grid point (the cross product) with each seed."""
    from grpo_lab.rundir.reader import RunNameError, check_name

    try:
        check_name(name)
    except RunNameError:
        raise SweepError(f"name: must be letters, digits, '.', '_', '-', starting with a letter or digit, "
                         f"got {name!r}") from None
    keys = [k for k, _ in grid]
    points = list(itertools.product(*(values for _, values in grid)))
    if len(points) * len(seeds) > MAX_SWEEP_RUNS:
        raise SweepError(f"grid: {len(points)} grid points x {len(seeds)} seeds = {len(points) * len(seeds)} runs; "
                         f"a sweep may have at most {MAX_SWEEP_RUNS}")
    runs = []
    for point in points:
        variant = ",".join(f"{k}={v}" for k, v in zip(keys, point)) or "base"
        for seed in seeds:
            run = run_name(name, variant, seed)
            values = {**base, **dict(zip(keys, point)), "seed": seed, "sweep": name, "variant": variant, "name": run}
            runs.append(PlannedRun(name=run, variant=variant, seed=seed, values=values))
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise SweepError("grid: two runs would get the same name after shortening; use a shorter sweep name")
    return runs


def base_values(rest: list[str]) -> dict[str, Any]:
    """The trainer options after the sweep's own, read with the trainer's parser (and --config)."""
    from grpo_lab.trainer.config import ConfigError, build_parser, read_config_file

    try:
        args = build_parser().parse_args(rest)
        values = read_config_file(args.config) if args.config else {}
    except ConfigError as exc:
        raise SweepError(str(exc)) from None
    # a file may be an earlier run's config.json: what the sweep sets per run is dropped from it
    values = {k.replace("-", "_"): v for k, v in values.items() if k.replace("-", "_") not in PER_RUN}
    values.pop(SOURCES_KEY, None)
    flags = {k: v for k, v in vars(args).items() if k != "config" and v is not None}
    for key in PER_RUN:  # name, runs_dir, resume: the sweep's own flags take these before this parser sees them
        if key in flags:
            raise SweepError(f"{key}: set per run by the sweep" + ("; use --seeds or --seed-list" if key == "seed" else ""))
    return {**values, **flags}


def check_all(runs: list[PlannedRun], runs_dir: Path, processes: int = 1) -> None:
    """Every run through the launch checks (the trainer's own messages) before anything is queued."""
    from grpo_lab.dashboard.launching import launcher

    for run in runs:
        try:
            launcher.checked_config({k: v for k, v in run.values.items() if v is not None and v != ""}, runs_dir,
                                    processes)
        except (launcher.LaunchError, ValueError) as exc:
            raise SweepError(f"{run.variant}: {exc}" if run.variant != "base" else str(exc)) from None


def existing(runs_dir: Path, name: str, runs: list[PlannedRun]) -> list[str]:
    """Runs or launches already in runs_dir that belong to sweep `name` (or take one of its names)."""
    from grpo_lab.dashboard.launching import launcher
    from grpo_lab.rundir.reader import list_runs

    taken = {r.name for r in list_runs(runs_dir) if (r.config or {}).get("sweep") == name}
    for run in runs:
        if (runs_dir / run.name).exists() or (runs_dir / launcher.LAUNCH_DIR / f"{run.name}.json").exists():
            taken.add(run.name)
    return sorted(taken)


def run_state(runs_dir: Path, name: str) -> tuple[str, int, int]:
    """(state, step, total steps) of one run of the sweep: its run directory's state, else its
    launch record's: queued, refused, launching (the trainer is alive), failed (it died before
    writing status.json), or missing (never launched)."""
    from grpo_lab.dashboard.launching import launcher
    from grpo_lab.rundir.layout import read_json
    from grpo_lab.rundir.reader import read_run

    info = read_run(runs_dir, name)
    record = read_json(runs_dir / launcher.LAUNCH_DIR / f"{name}.json")
    if info.status is not None:
        # a resumed run reads 'stopped' until its new trainer says otherwise: alive means not ended
        resuming = info.state in ("stopped", "failed") and launcher.is_trainer_of((record or {}).get("pid"), name, runs_dir)
        return ("launching" if resuming else info.state), info.step, info.total_steps
    if record is None:
        return "missing", 0, 0
    if record.get("refused"):
        return "refused", 0, 0
    if record.get("queued") and not record.get("pid"):
        return "queued", 0, 0
    return ("launching" if launcher.is_trainer_of(record.get("pid"), name, runs_dir) else "failed"), 0, 0


def start(runs: list[PlannedRun], runs_dir: Path, resume: bool, processes: int = 1) -> list[str]:
    """Queue or start every run not yet there; with `resume`, restart the unfinished ones when a
    slot is free (launcher.resume starts at once, so it is held back here as the queue would)."""
    from grpo_lab.dashboard.launching import launcher

    waiting = []
    for run in runs:
        state = run_state(runs_dir, run.name)[0] if resume else "missing"
        if state in ("stopped", "failed") and (runs_dir / run.name / "config.json").is_file():
            waiting.append(run.name)  # resumed from its checkpoint by resume_waiting
            continue
        if state in ("refused", "failed"):  # a launch that never made its run: start it afresh
            launcher.dismiss(runs_dir, run.name)
            state = "missing"
        if state == "missing":
            try:  # checked already; what can still refuse is the folder changing under us (a name taken since)
                launcher.launch({k: v for k, v in run.values.items() if v is not None and v != ""}, runs_dir, processes)
            except (launcher.LaunchError, ValueError) as exc:
                print(f"error: {run.name}: {exc}", file=sys.stderr)
    return waiting


def submit(name: str, base: dict[str, Any], grid_items: list[str], seeds: list[int], runs_dir: Path,
           processes: int = 1) -> list[PlannedRun]:
    """A new sweep planned, checked and queued (the launch form's Seeds / Sweep over); SweepError
    with one line, before anything is queued, when it is refused."""
    base = {k: v for k, v in base.items() if k not in PER_RUN}
    runs = plan(name, base, parse_grid(grid_items), seeds)
    check_all(runs, runs_dir, processes)
    if taken := existing(runs_dir, name, runs):
        raise SweepError(f"name: a sweep or run named {taken[0]!r} exists; choose another name")
    Path(runs_dir).mkdir(parents=True, exist_ok=True)
    start(runs, Path(runs_dir), resume=False, processes=processes)
    return runs


def resume_waiting(runs_dir: Path, waiting: list[str]) -> list[str]:
    """Resume held-back runs while slots are free; returns those still waiting."""
    from grpo_lab.dashboard.launching import launcher

    while waiting and launcher.training(runs_dir) < launcher.max_runs():
        name = waiting.pop(0)
        try:
            launcher.resume(runs_dir, name)
        except (launcher.LaunchError, ValueError) as exc:  # it stays unfinished, and --wait names it
            print(f"error: {name}: {exc}", file=sys.stderr)
    return waiting


def wait(runs: list[PlannedRun], runs_dir: Path, held: list[str], poll: float) -> list[str]:
    """Block until every run has ended, starting queued ones as slots free; one progress bar over
    the sweep's steps. Returns 'name (state)' for each run that did not finish."""
    from tqdm import tqdm

    from grpo_lab.dashboard.launching import launcher

    total = sum(int(r.values.get("max_steps") or 0) or 200 for r in runs)
    with tqdm(total=total, desc=f"sweep {runs[0].values['sweep']}", unit="step") as bar:
        while True:
            launcher.start_queued(runs_dir)
            held = resume_waiting(runs_dir, held)
            states = {r.name: run_state(runs_dir, r.name) for r in runs}
            done = sum(steps if state == "finished" else step for state, step, steps in states.values())
            bar.update(max(0, min(done, bar.total) - bar.n))
            ended = [n for n, (state, _, _) in states.items() if state in (*ENDED, "refused", "missing")]
            bar.set_postfix_str(f"{len(ended)}/{len(runs)} ended")
            if len(ended) == len(runs) and not held:
                return [f"{n} ({states[n][0]})" for n in states if states[n][0] != "finished"]
            time.sleep(poll)


def main(argv: list[str] | None = None) -> int:
    args, rest = _parser().parse_known_args(argv)
    runs_dir = Path(args.runs_dir or default_runs_dir())
    try:
        runs = plan(args.name, base_values(rest), parse_grid(args.grid), seeds_of(args.seeds, args.seed_list))
        check_all(runs, runs_dir)
        taken = existing(runs_dir, args.name, runs)
        if taken and not args.resume:
            raise SweepError(f"name: a sweep named {args.name!r} exists ({len(taken)} runs, e.g. {taken[0]}); "
                             "choose another name or add --resume to restart its unfinished runs")
    except SweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    runs_dir.mkdir(parents=True, exist_ok=True)
    held = start(runs, runs_dir, args.resume)
    held = resume_waiting(runs_dir, held)
    variants = sorted({r.variant for r in runs})
    print(f"sweep {args.name}: {len(runs)} runs ({len(variants)} variants x {len(runs) // len(variants)} seeds) "
          f"in {runs_dir}; open /compare?sweep={args.name} in the dashboard")
    if not args.wait:
        if held:
            print(f"{len(held)} unfinished runs wait for a free slot: run again with --resume --wait to restart them")
        return 0
    try:
        failed = wait(runs, runs_dir, held, args.poll)
    except KeyboardInterrupt:  # only the waiting stops: the runs train on, detached
        print("\nstopped waiting; the runs go on (queued ones start while the dashboard's Runs page is open, or "
              "run this command again with --resume --wait)", file=sys.stderr)
        return 130
    if failed:
        print(f"error: {len(failed)} of {len(runs)} runs did not finish: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"sweep {args.name}: all {len(runs)} runs finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
