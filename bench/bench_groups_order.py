"""Groups at a step, ordered by each metric, on the Live benchmark's big run (target: <= 1 s, median of 5).

    .venv/bin/python bench/bench_groups_order.py              # build the run in a temp folder, measure
    .venv/bin/python bench/bench_groups_order.py --keep DIR   # keep (or reuse) the run in DIR

The run is bench/bench_dashboard.py's (10,000 steps, 1,000,000 sample rows, token detail for 2 groups a
step) with the per-sample columns a new trainer writes beside the ones it has (entropy_mean,
clipped_tokens, ratio_max, tool_errors), so every ordering has its figure. Three figures per ordering,
a different random step each time:
`cold`: the whole Groups script under Streamlit's AppTest opened from the address
(/groups?run=big&step=S&sort=KEY: reading, the DuckDB aggregate, the group, its tokens), every cache
emptied first (the run's list of steps is read again too);
`page`: the same with the run's caches as a serving dashboard has them (a step not opened before, so
everything about the step is read);
`query`: queries.group_figures alone, caches emptied (the aggregate over the step's groups and, for what
the samples lack, the tokens table).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_dashboard as big  # noqa: E402

from grpo_lab.dashboard import pages  # noqa: E402
from grpo_lab.rundir import group_order  # noqa: E402

TARGET = 1.0


def chunk_with_per_sample(rng: np.random.Generator, first: int, last: int, t0: float) -> dict[str, dict]:
    """bench_dashboard's rows, with the per-sample figures that new runs write."""
    tables = base_chunk(rng, first, last, t0)
    samples = tables["samples"]
    n = len(samples["step"])
    samples["entropy_mean"] = rng.random(n) * 2
    samples["clipped_tokens"] = np.round(samples["clip_frac"] * samples["length"]).astype(int)
    samples["ratio_max"] = samples["ratio_mean"] + rng.random(n) * 0.2
    samples["tool_errors"] = rng.integers(0, 2, n)
    return tables


base_chunk = big.chunk


def build(runs_dir: Path, name: str) -> None:
    if (runs_dir / name / "config.json").is_file():
        return
    print(f"writing {big.STEPS:,} steps, {big.STEPS * big.GROUP * big.PROMPTS:,} sample rows to {runs_dir / name} ...",
          flush=True)
    big.chunk = chunk_with_per_sample  # make_run looks chunk up in its module
    try:
        print(f"  {big.timed(lambda: big.make_run(runs_dir / name)):.1f} s", flush=True)
    finally:
        big.chunk = base_chunk


def measure(runs_dir: Path, name: str, repeats: int) -> dict[str, dict[str, list[float]]]:
    from grpo_lab.dashboard.reading import queries

    at = big.app(runs_dir)
    at.session_state["run"] = name
    at.switch_page(pages.path("groups"))
    at.run()  # imports and the first page: a dashboard pays them once
    rng = np.random.default_rng(35)
    out: dict[str, dict[str, list[float]]] = {}
    def open_at(step: int, sort: str) -> float:
        at.query_params["step"], at.query_params["sort"] = str(step), sort
        seconds = big.timed(at.run)
        big.check(at, "Groups")
        if not [s for s in at.selectbox if s.key == f"groups_pick_{step}_{sort}"]:
            raise SystemExit(f"{sort}: the page did not open step {step} in that order")
        return seconds

    for sort in group_order.ORDERS:
        figures: dict[str, list[float]] = {"cold": [], "page": [], "query": []}
        for _ in range(repeats):
            step, other = (int(s) for s in rng.integers(1, big.STEPS + 1, 2))
            big.clear_caches()
            figures["cold"].append(open_at(step, sort))
            figures["page"].append(open_at(other, sort))
            big.clear_caches()
            figures["query"].append(big.timed(lambda: queries.group_figures(name, step)))
        out[sort] = figures
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", help="folder for the run (reused when it is already there)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    runs_dir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-groups-order-"))
    name = "big"
    try:
        build(runs_dir, name)
        big.set_status(runs_dir / name, big.STEPS, big.STEPS + 100, time.time() - big.STEPS * 0.3)
        results = measure(runs_dir, name, args.repeats)
        print(f"\n{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (other processes slow the wall times)")
        print(f"{'sort':<14}{'cold median':>12}{'cold max':>10}{'page median':>12}{'page max':>10}{'query median':>14}"
              "   target (page median)")
        for sort, figures in results.items():
            median = statistics.median(figures["page"])
            print(f"{sort:<14}{statistics.median(figures['cold']):>12.3f}{max(figures['cold']):>10.3f}{median:>12.3f}"
                  f"{max(figures['page']):>10.3f}{statistics.median(figures['query']):>14.3f}"
                  f"   <= {TARGET} s  {'ok' if median <= TARGET else 'MISSED'}")
        print(f"load average {os.getloadavg()[0]:.1f}")
    finally:
        if not args.keep:
            shutil.rmtree(runs_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
