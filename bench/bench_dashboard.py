"""Dashboard speed on a big synthetic run: 10,000 steps, 1,000,000 sample rows.

    .venv/bin/python bench/bench_dashboard.py              # build the run in a temp folder, measure
    .venv/bin/python bench/bench_dashboard.py --keep DIR   # keep (or reuse) the run in DIR
    .venv/bin/python bench/bench_dashboard.py --browser    # also time a real Chromium page load

Targets (issue 3, on 2 cores): first render of Live <= 1.5 s, a refresh <= 0.3 s, Groups for one
step <= 0.5 s; issue 14: Live fully drawn in a real browser <= 1.5 s. The run is written with
rundir.writer (the trainer's own writer), every column of docs/run-directory.md, and compacted as the
trainer leaves it. Pages are timed server-side with Streamlit's AppTest (the whole script run: reading,
downsampling, chart specs, serialisation); caches are emptied before each "first" figure, imports are
not (a dashboard imports once).

--browser: from navigation to every chart of the first paint drawn (the overview; the other sections
wait in closed expanders, grpo_lab/dashboard/views/live_view.py), median of three loads; then, once, the seconds from
clicking the first closed section to every section's charts drawn, opening them one after another.
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

from grpo_lab.rundir.layout import SCHEMA_VERSION, RunPaths, write_json_atomic  # noqa: E402
from grpo_lab.rundir.writer import RunWriter  # noqa: E402

STEPS, GROUP, PROMPTS = 10_000, 10, 10  # 100 sample rows a step
TOKEN_GROUPS, TOKENS = 2, 4
SCALARS = ["reward/mean", "reward/std", "reward/min", "reward/max", "rewards/correctness/mean",
           "rewards/correctness/std", "rewards/correctness/min", "rewards/correctness/max",
           "rewards/correctness/none_frac", "rewards/correctness/errors", "advantage/mean", "advantage/std",
           "advantage/min", "advantage/max", "groups/frac_zero_std", "clip/low", "clip/high", "clip/total",
           "ratio/mean", "ratio/min", "ratio/max", "kl/mean", "entropy/mean", "loss/policy", "loss/total",
           "grad/norm", "lr", "completion/length_mean", "completion/length_max", "completion/truncated_frac",
           "time/step_s", "time/generation_s", "perf/tokens_per_s"]
EDGES = np.linspace(0.5, 1.5, 41).tolist()


def chunk(rng: np.random.Generator, first: int, last: int, t0: float) -> dict[str, dict]:
    """Rows of every table for steps first..last, shaped like the trainer's."""
    steps = np.arange(first, last + 1)
    n = len(steps)
    progress = steps / STEPS
    scalars = {"step": steps, "time": t0 + steps * 0.3, "wall_s": steps * 0.3}
    for name in SCALARS:
        scalars[name] = rng.random(n) * 0.1 + progress
    rows = n * GROUP * PROMPTS
    s_step = np.repeat(steps, GROUP * PROMPTS)
    a, b = rng.integers(0, 6, (2, n * PROMPTS))
    pid = np.char.add(np.char.add(a.astype(str), "+"), b.astype(str))
    reward = (rng.random(rows) < np.repeat(progress, GROUP * PROMPTS)).astype(float)
    r = reward.reshape(-1, GROUP)
    std = r.std(axis=1, keepdims=True)
    adv = np.where(std > 1e-6, (r - r.mean(axis=1, keepdims=True)) / np.where(std > 1e-6, std, 1), 0).ravel()
    samples = {
        "step": s_step, "group": np.tile(np.repeat(np.arange(PROMPTS), GROUP), n),
        "prompt_id": np.repeat(pid, GROUP), "sample_idx": np.tile(np.arange(GROUP), n * PROMPTS),
        "prompt": np.repeat(np.char.add(pid, "="), GROUP), "completion": rng.integers(0, 12, rows).astype(str),
        "reward": reward, "advantage": adv, "rewards/correctness": reward,
        "length": rng.integers(1, 5, rows), "truncated": rng.random(rows) < 0.1,
        "ratio_mean": 1 + rng.normal(0, 0.05, rows), "clip_frac": rng.random(rows) * 0.1, "kl_mean": rng.random(rows) * 0.01,
    }
    counts = rng.multinomial(800, np.exp(-np.linspace(-2, 2, 40) ** 2) / np.exp(-np.linspace(-2, 2, 40) ** 2).sum(), n)
    hist = {"step": steps, "edges": [EDGES] * n, "counts": counts.tolist(), "tokens": counts.sum(axis=1),
            "clipped_low": rng.integers(0, 20, n), "clipped_high": rng.integers(0, 20, n),
            "clip_low_bound": np.full(n, 0.8), "clip_high_bound": np.full(n, 1.2)}
    per_step = TOKEN_GROUPS * GROUP * TOKENS
    t = n * per_step
    tokens = {
        "step": np.repeat(steps, per_step),
        "group": np.tile(np.repeat(np.arange(TOKEN_GROUPS), GROUP * TOKENS), n),
        "prompt_id": np.repeat(pid.reshape(n, PROMPTS)[:, :TOKEN_GROUPS].ravel(), GROUP * TOKENS),
        "sample_idx": np.tile(np.repeat(np.arange(GROUP), TOKENS), n * TOKEN_GROUPS),
        "position": np.tile(np.arange(TOKENS), n * TOKEN_GROUPS * GROUP),
        "token": rng.integers(0, 10, t).astype(str), "logp_new": -rng.random(t), "logp_old": -rng.random(t),
        "logp_ref": -rng.random(t), "ratio": 1 + rng.normal(0, 0.1, t), "kl": rng.random(t) * 0.01,
        "clipped_low": rng.random(t) < 0.02, "clipped_high": rng.random(t) < 0.02,
        "advantage": np.repeat(adv.reshape(n, PROMPTS * GROUP)[:, :TOKEN_GROUPS * GROUP].ravel(), TOKENS),
    }
    tokens["clipped"] = tokens["clipped_low"] | tokens["clipped_high"]
    return {"scalars": scalars, "samples": samples, "histograms": hist, "tokens": tokens}


def make_run(root: Path, steps: int = STEPS, per_part: int = 250) -> Path:
    """A finished-looking run directory of `steps` steps (then marked running for the Live timer)."""
    paths = RunPaths(root)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.time() - steps * 0.3
    write_json_atomic(paths.config, {"name": root.name, "algo": "grpo", "model": "tiny", "task": "arithmetic",
                                     "max_steps": steps + 100, "group_size": GROUP, "prompts_per_step": PROMPTS,
                                     "epsilon": 0.2, "epsilon_high": None, "beta": 0.04, "std_mode": "group",
                                     "token_detail_groups": TOKEN_GROUPS, "rewards": {"correctness": 1.0}})
    writer = RunWriter(paths, "full", flush_seconds=0, compact_every=1000)
    rng = np.random.default_rng(0)
    for first in range(1, steps + 1, per_part):
        for table, cols in chunk(rng, first, min(first + per_part - 1, steps), t0).items():
            writer.log(table, cols)
        writer.flush()
    writer.close()
    set_status(root, steps, steps + 100, t0)
    return root


def set_status(root: Path, step: int, total: int, t0: float) -> None:
    write_json_atomic(RunPaths(root).status, {
        "schema_version": SCHEMA_VERSION, "state": "running", "pid": os.getpid(), "step": step, "total_steps": total,
        "started_at": t0, "updated_at": time.time(), "error": None, "name": root.name, "algo": "grpo",
        "model": "tiny", "task": "arithmetic"})


def append_steps(root: Path, first: int, last: int) -> None:
    """What the trainer does every flush_seconds: one new part per table."""
    writer = RunWriter(RunPaths(root), "full", flush_seconds=0, compact_every=1000)
    for table, cols in chunk(np.random.default_rng(first), first, last, time.time() - 60).items():
        writer.log(table, cols)
    writer.flush()
    set_status(root, last, STEPS + 100, time.time() - STEPS * 0.3)


CPU: dict[str, list[float]] = {}  # process CPU seconds per measure (all threads), beside wall time


def timed(fn, key: str | None = None) -> float:
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    if key:
        CPU.setdefault(key, []).append(time.process_time() - cpu)
    return time.perf_counter() - start


def app(runs_dir: Path):
    os.environ["GRPO_LAB_RUNS_DIR"] = str(runs_dir)
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "grpo_lab" / "dashboard" / "app.py"), default_timeout=120)
    at.run()
    return at


def check(at, page: str) -> None:
    problems = [e.value for e in at.error if "hit a problem" in e.value] + [str(e.message) for e in at.exception]
    if problems:
        raise SystemExit(f"{page}: the page reported errors: {problems}")


def clear_caches() -> None:
    import streamlit as st

    st.cache_data.clear()
    st.cache_resource.clear()


def bench(runs_dir: Path, name: str, repeats: int) -> dict[str, list[float]]:
    import streamlit as st

    out: dict[str, list[float]] = {"live_first": [], "live_refresh": [], "live_rerun_no_new_data": [],
                                   "groups_first": [], "groups_step": [], "groups_step_cached": []}
    next_step = STEPS + 1
    for _ in range(repeats):
        clear_caches()
        at = app(runs_dir)
        at.session_state["run"] = name
        at.switch_page("app_pages/live.py")
        out["live_first"].append(timed(at.run, "live_first"))
        check(at, "Live")
        out["live_rerun_no_new_data"].append(timed(at.run, "live_rerun_no_new_data"))
        append_steps(runs_dir / name, next_step, next_step + 1)
        next_step += 2
        out["live_refresh"].append(timed(at.run, "live_refresh"))
        check(at, "Live")
        at.switch_page("app_pages/groups.py")
        out["groups_first"].append(timed(at.run, "groups_first"))
        check(at, "Groups")
        at.number_input(key="groups_step").set_value(int(np.random.default_rng(len(out["groups_step"])).integers(1, STEPS)))
        out["groups_step"].append(timed(at.run, "groups_step"))
        check(at, "Groups")
        out["groups_step_cached"].append(timed(at.run, "groups_step_cached"))
    del st
    return out


def browser_load(runs_dir: Path, names: list[str]) -> dict[str, tuple[float, float]]:
    """Per run: (seconds from navigation to every chart of Live's first paint drawn, median of three;
    seconds from opening the first closed section to the charts of all of them drawn), headless Chromium."""
    import socket
    import subprocess
    import urllib.request

    from playwright.sync_api import sync_playwright

    from grpo_lab.dashboard.views import metrics

    sections = [p.section for p in metrics.panels(["step", "time", "wall_s", *SCALARS])]  # the bench runs' columns
    first = sections.count("overview")
    # the closed sections' charts, in page order; last the ratio histogram's heatmap and one step's bars
    closed = [n for n in map(sections.count, metrics.SECTIONS[1:]) if n] + [2]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "GRPO_LAB_RUNS_DIR": str(runs_dir)}
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "grpo_lab" / "dashboard" / "app.py"),
                               "--server.port", str(port), "--server.headless", "true",
                               "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def drawn(n: int) -> str:  # n charts on the page, and every one of them drawn
        return ("(() => { const cs = [...document.querySelectorAll('[data-testid=stVegaLiteChart]')]; "
                f"return cs.length >= {n} && cs.every(c => c.querySelector('canvas, svg')); }})()")

    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health")
                break
            except OSError:
                time.sleep(0.2)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                        args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            out = {}
            for name in names:
                page.goto(f"http://127.0.0.1:{port}/live?run={name}")  # warm the server: imports, first caches
                page.wait_for_function(drawn(first), timeout=120_000)
                times = []
                for _ in range(3):
                    start = time.perf_counter()
                    page.goto(f"http://127.0.0.1:{port}/live?run={name}")
                    page.wait_for_function(drawn(first), timeout=120_000)
                    times.append(time.perf_counter() - start)
                expanders = page.locator("[data-testid=stExpander] summary")
                shown, start = first, time.perf_counter()
                for i, n in enumerate(closed):
                    expanders.nth(i).dispatch_event("click")  # click() waits ~1 s for the moving page to settle
                    shown += n
                    page.wait_for_function(drawn(shown), timeout=120_000)
                out[name] = (statistics.median(times), time.perf_counter() - start)
            browser.close()
            return out
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", help="folder for the runs (reused when the run is already there)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--browser", action="store_true", help="also time Live in headless Chromium")
    args = parser.parse_args()
    runs_dir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-dashboard-"))
    name = "big"
    try:
        if not (runs_dir / name / "config.json").is_file():
            print(f"writing {STEPS:,} steps, {STEPS * GROUP * PROMPTS:,} sample rows to {runs_dir / name} ...", flush=True)
            print(f"  {timed(lambda: make_run(runs_dir / name)):.1f} s")
        set_status(runs_dir / name, STEPS, STEPS + 100, time.time() - STEPS * 0.3)  # running, in this process
        # Warm-up on a small run: imports (streamlit, duckdb, torch for the group math) happen once a process.
        if not (runs_dir / "small").exists():
            make_run(runs_dir / "small", steps=20, per_part=10)
        at = app(runs_dir)
        for page in ("live", "groups", "compare"):
            at.session_state["run"] = "small"
            at.switch_page(f"app_pages/{page}.py")
            at.run()
        results = bench(runs_dir, name, args.repeats)
        print(f"\n{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (other processes slow the wall times)")
        print(f"{'measure':<26}{'wall median':>12}{'wall max':>10}{'cpu median':>12}   target (wall)")
        targets = {"live_first": 1.5, "live_refresh": 0.3, "groups_step": 0.5}
        for key, values in results.items():
            target = targets.get(key)
            verdict = "" if target is None else f"<= {target} s  {'ok' if statistics.median(values) <= target else 'MISSED'}"
            print(f"{key:<26}{statistics.median(values):>12.3f}{max(values):>10.3f}"
                  f"{statistics.median(CPU.get(key, [0.0])):>12.3f}   {verdict}")
        if args.browser:
            for run, (seconds, opened) in browser_load(runs_dir, ["small", name]).items():
                print(f"{'browser: Live drawn, ' + run:<26}{seconds:>12.3f}   (page load to every chart of the "
                      f"first paint drawn) <= 1.5 s  {'ok' if seconds <= 1.5 else 'MISSED'}")
                print(f"{'browser: sections, ' + run:<26}{opened:>12.3f}   (every closed section opened, one "
                      "after another, to all their charts drawn)")
            print(f"load average {os.getloadavg()[0]:.1f}")
    finally:
        if not args.keep:
            shutil.rmtree(runs_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
