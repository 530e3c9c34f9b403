"""Where the test suite's CPU goes: pytest runs (as `make test` runs it, or with the arguments
given) while every process on the machine is sampled once a second; then the CPU seconds of
each kind of process, beside the machine's total over the same time.

    .venv/bin/python bench/bench_suite_cpu.py                  # the whole suite, 4 workers
    .venv/bin/python bench/bench_suite_cpu.py tests/dashboard/browser    # a part (same workers)
    .venv/bin/python bench/bench_suite_cpu.py --durations=20   # and the 20 slowest tests
    .venv/bin/python bench/bench_suite_cpu.py --top 30         # the 30 test files and tests costing most CPU

On 2 cores the suite is CPU-bound (the cores are busy the whole run), so its wall time is about
this total over 2: cutting the suite means cutting one of these rows. A process that lives under
a second may be missed, as is what a process used before the first sample; both land in
"not seen" (with the kernel's own threads).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import defaultdict

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAKE_TEST = ["-n", "4", "--dist", "loadgroup", "--no-loadscope-reorder"]
# (kind, words of the command line that say it), first match wins
KINDS = [("torchrun / accelerate launcher", ("torch.distributed.run", "bin/torchrun ", "bin/accelerate ")),
         ("Chromium", ("/chromium",)),
         ("trainer", ("grpo_lab.trainer", "grpo-lab-train", "trainer/__main__", "straggler.py", "trainer_fork.py")),
         ("Playwright driver", ("playwright/driver",)),
         ("dashboard server", ("streamlit", "grpo-lab-dashboard")),
         ("pytest and its workers", ("pytest", "execnet", "import sys;exec(eval(")),
         ("reward helpers (math-verify, sandbox)", ("grpo_lab/rewards/_", "sandbox")),
         ("other Python", ("python",))]


def kind(cmdline: str) -> str:
    return next((name for name, words in KINDS if any(w in cmdline for w in words)), "other")


def snapshot(me: int, known: dict) -> dict[int, tuple[float, str, str]]:
    """(cpu seconds, command line, test that started it) of every process but this one; a process whose
    command line can no longer be read (a zombie) keeps what `known` has for it."""
    now = {}
    for proc in psutil.process_iter(["pid", "cmdline", "cpu_times"]):
        info = proc.info
        if info["pid"] != me and info["cpu_times"] is not None:
            used = info["cpu_times"].user + info["cpu_times"].system
            was, line, test = known.get(info["pid"], (0.0, "", ""))
            if not line or used < was:  # first seen, or the pid now names another process
                line = " ".join(info["cmdline"] or [])
                try:
                    test = proc.environ().get("SUITE_CPU_TEST", "")
                except psutil.Error:
                    test = ""
            now[info["pid"]] = (used, line, test)
    return now


def sample(seen: dict, stop: threading.Event, me: int) -> None:
    """Keep `seen` at the latest snapshot of every process met, until `stop`."""
    while not stop.is_set():
        seen.update(snapshot(me, seen))
        stop.wait(1.0)


def why_heading(line: str) -> bool:
    """The heading of pytest's ERRORS or FAILURES section."""
    return line.startswith("=") and (" ERRORS " in line or " FAILURES " in line)


def costliest(seen: dict, before: dict, top: int) -> None:
    """The test files and the tests whose processes (each started while the test ran, with
    suite_cpu_plugin's $SUITE_CPU_TEST) cost most CPU: trainers, torchrun, servers, browsers."""
    tests: dict[str, float] = defaultdict(float)
    for pid, (cpu, _, test) in seen.items():
        if test:
            tests[test] += cpu - before.get(pid, 0.0)
    files: dict[str, float] = defaultdict(float)
    for test, used in tests.items():
        files[test.split("::")[0]] += used
    for title, table in (("test files", files), ("tests", tests)):
        print(f"costliest {title} (CPU s of the processes they started)")
        for name, used in sorted(table.items(), key=lambda kv: -kv[1])[:top]:
            print(f"  {used:7.1f}  {name}")
    print(f"  {sum(tests.values()):7.1f}  all {len(tests)} tests that started a process")


def main(args: list[str]) -> int:
    top = 0
    if "--top" in args:
        at = args.index("--top")
        top, args = int(args[at + 1]), args[:at] + args[at + 2:]
    cmd = [sys.executable, "-m", "pytest", "-q", *MAKE_TEST, "-p", "suite_cpu_plugin", *args]
    before = {pid: cpu for pid, (cpu, _, _) in snapshot(os.getpid(), {}).items()}
    seen: dict[int, tuple[float, str, str]] = {}
    stop = threading.Event()
    sampler = threading.Thread(target=sample, args=(seen, stop, os.getpid()), daemon=True)
    machine0, start = psutil.cpu_times(), time.monotonic()
    sampler.start()
    here = os.path.dirname(os.path.abspath(__file__))  # where pytest finds suite_cpu_plugin
    plugin_path = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    result = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": plugin_path},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    stop.set()
    sampler.join()
    wall, machine1 = time.monotonic() - start, psutil.cpu_times()
    total = sum(getattr(machine1, f) - getattr(machine0, f) for f in ("user", "nice", "system"))
    by_kind: dict[str, float] = {}
    for pid, (cpu, line, _) in seen.items():
        used = cpu - before.get(pid, 0.0)  # a process older than the run: only what it used during it
        if used > 0:
            name = kind(line)
            by_kind[name] = by_kind.get(name, 0.0) + used
    lines = result.stdout.strip().splitlines()
    slowest = next((i for i, line in enumerate(lines) if "slowest" in line and line.startswith("=")), len(lines) - 1)
    failed = next((i for i, line in enumerate(lines) if why_heading(line)), None)
    if failed is not None:  # why each failed: a flaky test may show it only this once
        end = next((i for i in range(failed + 1, len(lines)) if lines[i].startswith("=") and not why_heading(lines[i])),
                   slowest)
        print("\n".join(lines[failed:end]))
    print("\n".join(lines[slowest:]) if lines else "(no pytest output)")  # --durations=N's list, then the summary
    print(f"wall {wall:.0f} s; machine CPU {total:.0f} s (user + nice + system, {psutil.cpu_count()} cores)")
    for name, used in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"  {name:38s} {used:7.0f} s  {100 * used / total:5.1f}%")
    unseen = total - sum(by_kind.values())
    print(f"  {'not seen':38s} {unseen:7.0f} s  {100 * unseen / total:5.1f}%")
    if top:
        costliest(seen, before, top)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
