"""Dashboard speed on a big synthetic run: 10,000 steps, 1,000,000 sample rows.

    .venv/bin/python bench/bench_dashboard.py              # build the run in a temp folder, measure
    .venv/bin/python bench/bench_dashboard.py --keep DIR   # keep (or reuse) the run in DIR
    .venv/bin/python bench/bench_dashboard.py --browser    # also time a real Chromium page load
    .venv/bin/python bench/bench_dashboard.py --compare    # only Compare for a sweep of 15 runs (+ Chromium)

Targets (on 2 cores): first render of Live <= 1.5 s, a refresh <= 0.3 s, Groups for one
step <= 0.5 s; Live's first paint drawn in a real browser <= 1.0 s for the big run (each chart's
marks on a canvas, 400 points a curve, click columns instead of a Voronoi cell per point:
grpo_lab/dashboard/views/charts.py), <= 1.5 s for the small one; Groups drawn in a real browser
<= 1.5 s. The run is written with
rundir.writer (the trainer's own writer), every column of docs/run-directory.md, and compacted as the
trainer leaves it. Pages are timed server-side with Streamlit's AppTest (the whole script run: reading,
downsampling, chart specs, serialisation); caches are emptied before each "first" figure, imports are
not (a dashboard imports once).

--browser: from navigation to every chart of the first paint drawn (the overview; the other sections
wait in closed expanders, grpo_lab/dashboard/views/live/live_view.py), median of three loads; then, once, the seconds from
clicking the first closed section to every section's charts drawn, opening them one after another.
Then Groups on the big run: from navigation to a step's group drawn (its table of G responses), and
to the page done (the script finished: computation, tokens), median of three loads, each at a step
not read before. --sessions N: N Chromium sessions (contexts, each its own renderer) opening Groups
at once, each at its own step: p50 / p95 of the same two times, measured in each page from its own
navigation start (performance.now()), and the CPU seconds of the renderers and the server meanwhile.

--compare (target: drawn in a real browser in <= 2 s): `/compare?sweep=bench` over 3 variants x 5 seeds
of 200 steps (15 runs written as tests/variants_helpers.py writes them), from navigation to both band
charts, the per-metric table and the verdict drawn: on a fresh server, cold (server warmed on the
home page, tables not read yet) and warm (a reload); and the same page under AppTest.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grpo_lab.dashboard import pages  # noqa: E402
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
        at.switch_page(pages.path("live"))
        out["live_first"].append(timed(at.run, "live_first"))
        check(at, "Live")
        out["live_rerun_no_new_data"].append(timed(at.run, "live_rerun_no_new_data"))
        append_steps(runs_dir / name, next_step, next_step + 1)
        next_step += 2
        out["live_refresh"].append(timed(at.run, "live_refresh"))
        check(at, "Live")
        at.switch_page(pages.path("groups"))
        out["groups_first"].append(timed(at.run, "groups_first"))
        check(at, "Groups")
        at.number_input(key="groups_step").set_value(int(np.random.default_rng(len(out["groups_step"])).integers(1, STEPS)))
        out["groups_step"].append(timed(at.run, "groups_step"))
        check(at, "Groups")
        out["groups_step_cached"].append(timed(at.run, "groups_step_cached"))
    del st
    return out


@contextlib.contextmanager
def serve(runs_dir: Path, script: Path = ROOT / "grpo_lab" / "dashboard" / "app.py"):
    """`streamlit run` the dashboard (or `script`) over `runs_dir` on a free port, until its health check
    answers; yields the url."""
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "GRPO_LAB_RUNS_DIR": str(runs_dir)}
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(script),
                               "--server.port", str(port), "--server.headless", "true",
                               "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health")
                break
            except OSError:
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)


def chromium():
    """(playwright, a headless Debian Chromium page); stop the playwright when done."""
    from playwright.sync_api import sync_playwright

    p = sync_playwright().start()
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                args=["--no-sandbox", "--disable-gpu"])
    return p, browser.new_page(viewport={"width": 1500, "height": 1000})


def drawn(n: int) -> str:
    """JS: n charts on the page, and every one of them drawn."""
    return ("(() => { const cs = [...document.querySelectorAll('[data-testid=stVegaLiteChart]')]; "
            f"return cs.length >= {n} && cs.every(c => c.querySelector('canvas, svg')); }})()")


def browser_load(runs_dir: Path, names: list[str]) -> dict[str, tuple[float, float]]:
    """Per run: (seconds from navigation to every chart of Live's first paint drawn, median of three;
    seconds from opening the first closed section to the charts of all of them drawn), headless Chromium."""
    from grpo_lab.dashboard.views import metrics

    sections = [p.section for p in metrics.panels(["step", "time", "wall_s", *SCALARS])]  # the bench runs' columns
    first = sections.count("overview")
    # the closed sections' charts, in page order; last the ratio histogram's heatmap and one step's bars
    closed = [n for n in map(sections.count, metrics.SECTIONS[1:]) if n] + [2]
    with serve(runs_dir) as url:
        p, page = chromium()
        try:
            out = {}
            for name in names:
                page.goto(f"{url}/live?run={name}")  # warm the server: imports, first caches
                page.wait_for_function(drawn(first), timeout=120_000)
                times = []
                for _ in range(3):
                    start = time.perf_counter()
                    page.goto(f"{url}/live?run={name}")
                    page.wait_for_function(drawn(first), timeout=120_000)
                    times.append(time.perf_counter() - start)
                expanders = page.locator("[data-testid=stExpander] summary")
                shown, start = first, time.perf_counter()
                for i, n in enumerate(closed):
                    expanders.nth(i).dispatch_event("click")  # click() waits ~1 s for the moving page to settle
                    shown += n
                    page.wait_for_function(drawn(shown), timeout=120_000)
                out[name] = (statistics.median(times), time.perf_counter() - start)
            return out
        finally:
            p.stop()


# In-page timers for Groups: set on every navigation, they note performance.now() (from the page's own
# navigation start) once the group's table of responses has its G rows, and once the script has finished
# with that table on the page.
GROUPS_TIMER = f"""
(() => {{
  const tick = () => {{
    const rows = document.querySelectorAll('table.grpo-responses tr[data-adv]').length;
    if (rows >= {GROUP} && window.__tableAt === undefined) window.__tableAt = performance.now();
    const state = document.querySelector('[data-testid=stApp]')?.dataset.testScriptState;
    if (window.__tableAt !== undefined && state === 'notRunning' && window.__doneAt === undefined)
      window.__doneAt = performance.now();
    if (window.__doneAt === undefined) requestAnimationFrame(tick);
  }};
  requestAnimationFrame(tick);
}})();
"""
GROUPS_DONE = "window.__doneAt !== undefined"


def cpu_seconds(*words: str) -> float:
    """CPU seconds (user + system) so far of the processes whose command line holds every one of `words`."""
    total, tick = 0, os.sysconf("SC_CLK_TCK")
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if all(w in cmd for w in words):
            total += int(fields[11]) + int(fields[12])
    return total / tick


def groups_times(page) -> tuple[float, float]:
    """(seconds to the table drawn, seconds to the page done) of a Groups load under GROUPS_TIMER."""
    page.wait_for_function(GROUPS_DONE, timeout=120_000, polling=50)
    return page.evaluate("[window.__tableAt / 1000, window.__doneAt / 1000]")


def browser_groups(runs_dir: Path, name: str, sessions: int = 0) -> dict[str, tuple[float, ...]]:
    """Groups of `name` in headless Chromium, each load at a step not read before (the step's samples read
    from the run, not from a cache): `one`: (table, done) seconds, medians of three loads after a warm-up;
    with `sessions`: the same (p50 table, p95 table, p50 done, p95 done) over `sessions` contexts that
    navigate at once, each to its own step (the server warm: each context has loaded the page once),
    and `cpu`: the CPU seconds of Chromium's renderers and of the server over that burst."""
    from playwright.sync_api import sync_playwright

    out: dict[str, tuple[float, ...]] = {}
    with serve(runs_dir) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                    args=["--no-sandbox", "--disable-gpu"])
        steps = iter(range(STEPS // 2, STEPS, 97))  # a step each load

        def address() -> str:
            return f"{url}/groups?run={name}&step={next(steps)}"

        def new_page():
            context = browser.new_context(viewport={"width": 1500, "height": 1000})
            context.add_init_script(GROUPS_TIMER)
            return context.new_page()

        page = new_page()
        page.goto(address())
        groups_times(page)  # warm-up: imports, the first caches
        loads = []
        for _ in range(3):
            page.goto(address())
            loads.append(groups_times(page))
        out["one"] = tuple(statistics.median(x[i] for x in loads) for i in range(2))
        if sessions:
            pages = [new_page() for _ in range(sessions)]
            for pg in pages:  # each context's first load, one after another
                pg.goto(address())
                groups_times(pg)
            port = url.rsplit(":", 1)[1]
            before = cpu_seconds("chromium", "--type=renderer"), cpu_seconds("streamlit", port)
            for pg in pages:  # then all at once: goto returns once a navigation is under way
                pg.goto(address(), wait_until="commit")
            times = [groups_times(pg) for pg in pages]
            out["cpu"] = (cpu_seconds("chromium", "--type=renderer") - before[0],
                          cpu_seconds("streamlit", port) - before[1])

            def pct(values: list[float], q: float) -> float:
                return float(np.percentile(values, q))

            table, done = [t[0] for t in times], [t[1] for t in times]
            out["sessions"] = (pct(table, 50), pct(table, 95), pct(done, 50), pct(done, 95))
        browser.close()
    return out


# --- Compare for a sweep: 3 variants x 5 seeds of 200 steps (target: drawn in <= 2 s) ----------

SWEEP, SWEEP_LEVELS, SWEEP_SEEDS, SWEEP_STEPS = "bench", {"beta=0": 0.2, "beta=0.04": 0.8, "beta=0.1": 0.5}, 5, 200
# the whole variants view: both default charts drawn, the per-metric table's grid drawn, and the
# verdict (the page's last element, so the script's output has all arrived)
COMPARE_DRAWN = ("(() => { const cs = [...document.querySelectorAll('[data-testid=stVegaLiteChart]')]; "
                 "const grid = document.querySelector('[data-testid=stDataFrame] canvas'); "
                 "const md = [...document.querySelectorAll('[data-testid=stMarkdown]')]; "
                 "return cs.length >= 2 && cs.every(c => c.querySelector('canvas, svg')) && !!grid && "
                 "md.some(m => / seeds/.test(m.innerText)); })()")


def make_sweep(runs_dir: Path) -> None:
    """The 15 finished runs, written as the tests write them (tests/variants_helpers.py: the trainer's
    config record, rundir.writer's Parquet), named as grpo-lab-sweep names them."""
    sys.path.insert(0, str(ROOT / "tests"))
    from variants_helpers import write_sweep

    write_sweep(runs_dir, SWEEP, SWEEP_LEVELS, SWEEP_SEEDS, steps=SWEEP_STEPS)


def compare_load(page, url: str) -> float:
    """Seconds from navigation to /compare?sweep=bench drawn (COMPARE_DRAWN)."""
    start = time.perf_counter()
    page.goto(f"{url}/compare?sweep={SWEEP}")
    page.wait_for_function(COMPARE_DRAWN, timeout=120_000)
    return time.perf_counter() - start


# The floor under the figures: a page with the same elements (two layered Vega-Lite charts of 600
# points, a 15-row table, a line of text ending in "seeds") and no data work. On a shared machine
# it moves with the load as much as the Compare page does, so the two are printed side by side.
REFERENCE_PAGE = """
import numpy as np, pandas as pd, streamlit as st
st.set_page_config(layout="wide")
st.title("reference")
df = pd.DataFrame({"variant": np.repeat(["a", "b", "c"], 200), "x": np.tile(np.arange(200), 3), "mean": np.random.rand(600)})
df["low"], df["high"] = df["mean"] - 0.1, df["mean"] + 0.1
for i in range(2):
    st.vega_lite_chart(df, {"height": 220, "encoding": {"x": {"field": "x", "type": "quantitative"},
                                                        "color": {"field": "variant", "type": "nominal"}},
                            "layer": [{"mark": {"type": "area", "opacity": 0.2},
                                       "encoding": {"y": {"field": "low", "type": "quantitative"}, "y2": {"field": "high"}}},
                                      {"mark": "line", "encoding": {"y": {"field": "mean", "type": "quantitative"}}}]},
                       key=f"c{i}")
st.dataframe(pd.DataFrame({"variant": ["a", "b", "c"] * 5, "mean [95% CI]": ["0.5 [0.4, 0.6]"] * 15}), hide_index=True)
st.markdown("b is higher than a by 0.1 [0.05, 0.15] (5 and 5 seeds).")
"""


def browser_reference(runs_dir: Path, reloads: int = 3) -> float:
    """Seconds to draw REFERENCE_PAGE in Chromium (a reload, median of `reloads`)."""
    script = runs_dir.parent / f"{runs_dir.name}-reference.py"
    script.write_text(REFERENCE_PAGE)
    try:
        with serve(runs_dir, script) as url:
            p, page = chromium()
            try:
                def load() -> float:
                    start = time.perf_counter()
                    page.goto(url)
                    page.wait_for_function(COMPARE_DRAWN, timeout=120_000)
                    return time.perf_counter() - start

                load()
                return statistics.median(load() for _ in range(reloads))
            finally:
                p.stop()
    finally:
        script.unlink()


def browser_compare(runs_dir: Path, reloads: int = 3) -> dict[str, float]:
    """The Compare page for the sweep in headless Chromium, seconds: `fresh server`: the first page a
    new server serves (its imports included); `cold`: a server warmed on the home page, the sweep's
    tables not read yet; `warm`: a reload, median of `reloads`."""
    out = {}
    with serve(runs_dir) as url:
        p, page = chromium()
        try:
            out["fresh server"] = compare_load(page, url)
        finally:
            p.stop()
    with serve(runs_dir) as url:
        p, page = chromium()
        try:
            page.goto(url)  # the home page: the app's imports, not the sweep's tables
            page.wait_for_selector("[data-testid=stMainBlockContainer] h1", timeout=120_000)
            out["cold"] = compare_load(page, url)
            out["warm"] = statistics.median(compare_load(page, url) for _ in range(reloads))
        finally:
            p.stop()
    return out


def compare_server(runs_dir: Path, repeats: int) -> dict[str, list[float]]:
    """The Compare page for the sweep under AppTest: the whole script run, caches emptied (`first`),
    then a rerun with nothing new (`rerun`)."""
    out: dict[str, list[float]] = {"compare_first": [], "compare_rerun": []}
    for _ in range(repeats):
        at = app(runs_dir)
        at.query_params["sweep"] = SWEEP
        at.switch_page(pages.path("compare"))
        clear_caches()
        out["compare_first"].append(timed(at.run, "compare_first"))
        check(at, "Compare")
        out["compare_rerun"].append(timed(at.run, "compare_rerun"))
    return out


def compare_case(runs_dir: Path, repeats: int) -> None:
    """--compare: the sweep's Compare page, server-side and in Chromium, printed."""
    if not (runs_dir / f"{SWEEP}-beta_0-s0").exists():
        print(f"writing {len(SWEEP_LEVELS)} variants x {SWEEP_SEEDS} seeds of {SWEEP_STEPS} steps to {runs_dir} ...")
        print(f"  {timed(lambda: make_sweep(runs_dir)):.1f} s")
    at = app(runs_dir)  # imports, once a process, as a dashboard does
    at.switch_page(pages.path("compare"))
    at.run()
    results = compare_server(runs_dir, repeats)
    print(f"\n{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (other processes slow the wall times)")
    print(f"{'measure':<26}{'wall median':>12}{'wall max':>10}{'cpu median':>12}")
    for key, values in results.items():
        print(f"{key:<26}{statistics.median(values):>12.3f}{max(values):>10.3f}{statistics.median(CPU[key]):>12.3f}")
    for key, seconds in browser_compare(runs_dir).items():
        print(f"{'browser: Compare, ' + key:<32}{seconds:>6.3f}   (navigation to both charts, the table and the "
              f"verdict drawn) <= 2 s  {'ok' if seconds <= 2 else 'MISSED'}")
    print(f"{'browser: reference page, warm':<32}{browser_reference(runs_dir):>6.3f}   (the same elements, no data "
          "work: this machine's floor now)")
    print(f"load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", help="folder for the runs (reused when the run is already there)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--browser", action="store_true", help="also time Live in headless Chromium")
    parser.add_argument("--sessions", type=int, default=0,
                        help="with --browser: also N Chromium sessions opening Groups on the big run at once")
    parser.add_argument("--compare", action="store_true",
                        help="only the Compare page of a sweep of 3 variants x 5 seeds (server-side and in Chromium)")
    args = parser.parse_args()
    runs_dir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-dashboard-"))
    name = "big"
    try:
        if args.compare:
            compare_case(runs_dir, args.repeats)
            return
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
            at.switch_page(pages.path(page))
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
                goal = 1.0 if run == name else 1.5
                print(f"{'browser: Live drawn, ' + run:<26}{seconds:>12.3f}   (page load to every chart of the "
                      f"first paint drawn) <= {goal} s  {'ok' if seconds <= goal else 'MISSED'}")
                print(f"{'browser: sections, ' + run:<26}{opened:>12.3f}   (every closed section opened, one "
                      "after another, to all their charts drawn)")
            print(f"load average {os.getloadavg()[0]:.1f}")
            groups = browser_groups(runs_dir, name, args.sessions)
            table, done = groups["one"]
            print(f"{'browser: Groups table, ' + name:<26}{table:>12.3f}   (page load to a step's group drawn, "
                  f"the step not read before) <= 1.5 s  {'ok' if table <= 1.5 else 'MISSED'}")
            print(f"{'browser: Groups done, ' + name:<26}{done:>12.3f}   (page load to the script finished)")
            if "sessions" in groups:
                p50, p95, done50, done95 = groups["sessions"]
                renderers, server = groups["cpu"]
                print(f"browser: Groups, {args.sessions} sessions at once: table p50 {p50:.3f} p95 {p95:.3f}, "
                      f"done p50 {done50:.3f} p95 {done95:.3f} (CPU s over the burst: Chromium's renderers "
                      f"{renderers:.2f}, the server {server:.2f})")
            print(f"load average {os.getloadavg()[0]:.1f}")
    finally:
        if not args.keep:
            shutil.rmtree(runs_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
