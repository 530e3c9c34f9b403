"""Dashboard speed over a big runs folder: 10, 1,000, 5,000 and 10,000 runs.

    .venv/bin/python bench/bench_runs_scale.py                       # every size, 3 repeats, in a temp folder
    .venv/bin/python bench/bench_runs_scale.py --sizes 10,1000 --repeats 5
    .venv/bin/python bench/bench_runs_scale.py --keep /tmp/runs-scale   # keep (or reuse) the folders there

Target (on 2 cores): at 10,000 runs the Runs page's first render <= 1.5 s and a rerun
<= 0.3 s (a rerun happens every 2 s while a run is active), Compare's first render <= 1 s.

Each folder holds copies of one finished 3-step run (status.json, config.json and its scalars part,
written as tests/variants_helpers.py writes them: the trainer's config record and rundir.writer's
Parquet), hard-linked, so 10,000 runs cost a few seconds and no disk; plus three sweeps of 2 variants
x 2 seeds (their own config.json), a few tagged runs, so the sweep rows and the tag filter have
something to count, and a launch record for every other run (.launcher/, as a dashboard leaves them). Pages are timed server-side with Streamlit's AppTest (the whole script run:
reading, the listing, widgets, serialisation): `runs first` with every Streamlit cache emptied,
`runs rerun` the same session again with nothing new, past the listing's 1 s age (as the page's 2 s
timer reruns it), `compare first` the Compare page (no sweep
picked: the two newest runs) with the caches emptied again. Imports are not timed (a dashboard
imports once).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from grpo_lab.dashboard import pages  # noqa: E402
from grpo_lab.rundir import annotations  # noqa: E402
from variants_helpers import write_run  # noqa: E402

SIZES = (10, 1_000, 5_000, 10_000)
TARGETS = {"runs first": 1.5, "runs rerun": 0.3, "compare first": 1.0}  # at 10,000 runs
SWEEPS, VARIANTS, SEEDS = ("lr", "beta", "clip"), ("a=1", "a=2"), 2
LISTING_AGE_S = 1.1  # past the listing's max age (data.LISTING_MAX_AGE_S; the old cache's ttl, 1 s)


def copy_run(source: Path, target: Path) -> None:
    """`source` again as `target`, every file hard-linked (the folders made anew)."""
    for folder, _, files in os.walk(source):
        made = target / Path(folder).relative_to(source)
        made.mkdir(parents=True, exist_ok=True)
        for f in files:
            os.link(Path(folder) / f, made / f)


def make_folder(root: Path, runs: int) -> None:
    """`runs` runs in `root`: the sweeps' runs written, the rest copies of one plain run (one in 700
    tagged, every other one with a launch record)."""
    root.mkdir(parents=True)
    source = root.parent / f".source-{runs}"
    write_run(source.parent, source.name, "", "", 0, 0.5, steps=3)
    sweep_runs = [(s, v, seed) for s in SWEEPS for v in VARIANTS for seed in range(SEEDS)][:max(0, runs - 1)]
    for sweep, variant, seed in sweep_runs:
        write_run(root, f"{sweep}-{variant.replace('=', '_')}-s{seed}", sweep, variant, seed, 0.5, steps=3)
    launched = root / ".launcher"  # what a dashboard leaves of each run it launched: its launch record
    launched.mkdir()
    record = source.parent / f".record-{runs}.json"
    record.write_text(json.dumps({"name": "run", "pid": 0, "command": [], "processes": 1, "started_at": 1.7e9}))
    for i in range(runs - len(sweep_runs)):
        copy_run(source, root / f"run-{i:05d}")
        if i % 2 == 0:
            os.link(record, launched / f"run-{i:05d}.json")
        if i % 700 == 0:
            annotations.write(root / f"run-{i:05d}", tags=["keep", f"batch{i // 700}"], note="")
    shutil.rmtree(source)
    record.unlink()


def app(runs_dir: Path):
    os.environ["GRPO_LAB_RUNS_DIR"] = str(runs_dir)
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(ROOT / "grpo_lab" / "dashboard" / "app.py"), default_timeout=300)


def clear_caches() -> None:
    """Every Streamlit cache, and the runs folder's index (rundir/runs_index.py): a cold start."""
    import streamlit as st

    st.cache_data.clear()
    st.cache_resource.clear()
    try:
        from grpo_lab.rundir import runs_index
    except ImportError:  # a checkout from before the index (the "before" column)
        return
    runs_index.forget_all()


CPU: dict[str, list[float]] = {}  # the process's CPU seconds per measure (every thread: AppTest runs the page in one)


def timed(at, key: str) -> float:
    start, cpu = time.perf_counter(), time.process_time()
    at.run()
    seconds = time.perf_counter() - start
    CPU.setdefault(key, []).append(time.process_time() - cpu)
    problems = [e.value for e in at.error if "hit a problem" in e.value] + [str(e.message) for e in at.exception]
    if problems:
        raise SystemExit(f"the page reported errors: {problems}")
    return seconds


def measure(runs_dir: Path, repeats: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {key: [] for key in TARGETS}
    for _ in range(repeats):
        clear_caches()
        at = app(runs_dir)
        out["runs first"].append(timed(at, "runs first"))  # Runs is the default page
        time.sleep(LISTING_AGE_S)  # a rerun 2 s later, as the page's timer makes: the folder is looked at again
        out["runs rerun"].append(timed(at, "runs rerun"))
        at.switch_page(pages.path("compare"))
        clear_caches()
        out["compare first"].append(timed(at, "compare first"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="run counts, comma-separated")
    parser.add_argument("--repeats", type=int, default=3, help="measures per size; the table gives the median")
    parser.add_argument("--keep", help="folder for the runs folders (reused when already there)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-runs-scale-"))
    try:
        warm = base / "warm"  # imports (streamlit, duckdb, pandas), once a process, as a dashboard does
        if not warm.exists():
            make_folder(warm, 3)
        at = app(warm)
        at.run()
        at.switch_page(pages.path("compare"))
        at.run()
        rows = []
        for n in sizes:
            folder = base / f"runs-{n}"
            if not folder.exists():
                start = time.perf_counter()
                make_folder(folder, n)
                print(f"made {n:,} runs in {time.perf_counter() - start:.1f} s", flush=True)
            results = measure(folder, args.repeats)
            rows.append((n, {k: statistics.median(v) for k, v in results.items()},
                         {k: max(v) for k, v in results.items()},
                         {k: statistics.median(CPU[k][-args.repeats:]) for k in results}))
            print(f"{n:>6,} runs: " + ", ".join(f"{k} {statistics.median(v):.2f} s" for k, v in results.items())
                  + f" (load average {os.getloadavg()[0]:.1f})", flush=True)
        print(f"\n{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (other processes slow the wall "
              f"times; the CPU seconds the process used do not wait for them); median of {args.repeats}, (max)")
        print("| runs | Runs page first | Runs page rerun | Compare first | CPU: Runs first | rerun | Compare first |")
        print("|---|---|---|---|---|---|---|")
        for n, median, most, cpu in rows:
            print(f"| {n:,} | " + " | ".join(f"{median[k]:.2f} s ({most[k]:.2f})" for k in TARGETS) + " | "
                  + " | ".join(f"{cpu[k]:.2f} s" for k in TARGETS) + " |")
        if rows and rows[-1][0] >= 10_000:
            median = rows[-1][1]
            print("targets at 10,000 runs: " + ", ".join(
                f"{k} <= {v} s {'ok' if median[k] <= v else 'MISSED'}" for k, v in TARGETS.items()))
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
