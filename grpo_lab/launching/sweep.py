"""grpo-lab-sweep: one config, several seeds and a small grid, launched as one sweep.

    grpo-lab-sweep --name s --seeds 3 --grid beta=0,0.04 --max-steps 15 --wait

Every option the trainer takes (`--config base.yaml`, `--max-steps 15`, ...) is the sweep's shared
base, read with the trainer's own parser; `--grid KEY=V1,V2` (repeatable) crosses values on top of
it and `--seeds N` / `--seed-list 3,7,11` repeats each grid point. Each run's config.json carries
`sweep`, `variant` (its grid point as a label, `base` without a grid) and `seed`, which is how the
Compare page groups seeds into variants (grpo_lab/rundir/variants.py).

Runs go through the dashboard's on-disk launch queue (launching/launch_queue.py): the same checks as
the launch form, at most GRPO_LAB_MAX_RUNS training at once, the rest queued. Every run is checked
before the first one is queued, so a bad grid leaves nothing behind.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from grpo_lab.launching import launch_queue
from grpo_lab.launching.keys import KeyDirError, check_key_dir
from grpo_lab.launching.sweep_queue import (check_all, existing, resume_waiting, run_state,  # noqa: F401
                                                      start, submit)
from grpo_lab.rundir import sweep_manifest
from grpo_lab.rundir.layout import SOURCES_KEY, default_runs_dir
from grpo_lab.launching.sweep_grid import (ENDED, MAX_SWEEP_RUNS, PER_RUN, PlannedRun, SweepError, parse_grid,  # noqa: F401
                                 plan, run_name, seeds_of)


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


def base_values(rest: list[str]) -> dict[str, Any]:
    """The trainer options after the sweep's own, read with the trainer's parser (and --config)."""
    from grpo_lab.trainer.config import ConfigError, build_parser, read_config_file, typed_value

    try:
        args = build_parser().parse_args(rest)
        values = read_config_file(args.config) if args.config else {}
        # a file may be an earlier run's config.json: what the sweep sets per run is dropped from it
        values = {k.replace("-", "_"): v for k, v in values.items() if k.replace("-", "_") not in PER_RUN}
        values.pop(SOURCES_KEY, None)
        # the trainer's types and its rule for null (refused unless the option is optional), not "left out"
        values = {k: typed_value(k, v) for k, v in values.items()}
    except ConfigError as exc:
        raise SweepError(str(exc)) from None
    flags = {k: v for k, v in vars(args).items() if k != "config" and v is not None}
    for key in PER_RUN:  # name, runs_dir, resume: the sweep's own flags take these before this parser sees them
        if key in flags:
            raise SweepError(f"{key}: set per run by the sweep" + ("; use --seeds or --seed-list" if key == "seed" else ""))
    return {**values, **flags}


def wait(runs: list[PlannedRun], runs_dir: Path, held: list[str], poll: float) -> list[str]:
    """Block until every run has ended, starting queued ones as slots free; one progress bar over
    the sweep's steps. Returns 'name (state)' for each run that did not finish."""
    from tqdm import tqdm

    total = sum(int(r.values.get("max_steps") or 0) or 200 for r in runs)
    with tqdm(total=total, desc=f"sweep {runs[0].values['sweep']}", unit="step") as bar:
        while True:
            launch_queue.start_queued(runs_dir)
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
        check_key_dir(runs_dir)
        runs = plan(args.name, base_values(rest), parse_grid(args.grid), seeds_of(args.seeds, args.seed_list))
        entries = check_all(runs, runs_dir)
        taken = existing(runs_dir, args.name, runs)
        if taken and not args.resume:
            raise SweepError(f"name: a sweep named {args.name!r} exists ({len(taken)} runs, e.g. {taken[0]}); "
                             "choose another name or add --resume to restart its unfinished runs")
    except (SweepError, KeyDirError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    runs_dir.mkdir(parents=True, exist_ok=True)
    sweep_manifest.write(runs_dir, args.name, entries, new=not taken)  # --resume keeps the first: it checks against it
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
