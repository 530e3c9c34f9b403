"""A queued launch starts whenever a slot is free, with no Runs page open, and after
a dashboard restart. The dashboard is started as a user starts it (`python -m grpo_lab.dashboard.serve`,
the `grpo-lab-dashboard` command), so its queue scheduler runs beside it; one run at a time
(GRPO_LAB_MAX_RUNS=1); a sweep of three tiny runs launched from the Runs page's form. The second must
start with only another page open; the third, queued while the dashboard is stopped, must start after
it is started again, with no page open at all.

Before the fix only the Runs page's refresh started queued runs: the sweep stalled between runs
until Runs was opened again."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from playwright.sync_api import expect

from browser_helpers import (ROOT, free_port, main_text, open_expander, press, stop_server, wait_idle,
                             wait_until_healthy)
from grpo_lab.launching import launch_queue, process_control
from grpo_lab.launching.launch_records import LAUNCH_DIR, launch_log, record_names
from grpo_lab.launching.keys import KEY_DIR_ENV
from grpo_lab.rundir.layout import read_json
from grpo_lab.rundir.reader import read_run
from trainer_helpers import wait_until

SWEEP = "q"
# The form's smallest settings that train: a trainer's start (importing torch) is most of its ~10 s.
FORM = {"Steps": "8", "G (responses per prompt)": "2", "Passes per batch": "1", "Run name": SWEEP}
MORE = {"Prompts per step": "2", "Warm-start SFT steps": "1", "Max new tokens": "2", "Seeds": "3"}
ENDED = ("finished", "failed", "stopped")


def start_dashboard(tmp_path: Path, runs: Path, keys: Path, port: int) -> subprocess.Popen:
    """`grpo-lab-dashboard --server.port PORT` over `runs`, one run at a time; its output in tmp_path/streamlit.log
    (where wait_until_healthy looks)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GRPO_LAB_RUNS_DIR": str(runs), KEY_DIR_ENV: str(keys),
           launch_queue.MAX_RUNS_ENV: "1", "OMP_NUM_THREADS": "1"}  # trainers inherit it: a 2-core machine
    with open(tmp_path / "streamlit.log", "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "grpo_lab.dashboard.serve", "--server.port", str(port),
                                 "--server.fileWatcherType", "none"],
                                cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)


def schedulers(runs: Path) -> list[int]:
    """Pids of queue schedulers serving `runs` (none before the fix)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0") if proc.name.isdigit() else []
        except OSError:  # ended meanwhile
            continue
        if b"grpo_lab.launching.scheduler" in args and str(runs.resolve()).encode() in args:
            pids.append(int(proc.name))
    return pids


def launch_records(runs: Path) -> dict[str, dict]:
    return {name: record(runs, name) for name in record_names(runs)}


def record(runs: Path, name: str) -> dict:
    return read_json(runs / LAUNCH_DIR / f"{name}.json") or {}


def started(runs: Path, name: str) -> dict | None:
    """The launch record of `name` once a trainer was started for it (a queued entry has pid 0)."""
    rec = record(runs, name)
    return rec if rec.get("pid") else None


def stop_trainers(runs: Path, *names: str) -> None:
    """SIGKILL the live trainers of `names` (else of every launch record): one left going would take
    a core from the tests after this one."""
    for name, rec in launch_records(runs).items():
        if (not names or name in names) and process_control.is_trainer_of(rec.get("pid"), name, runs):
            os.kill(rec["pid"], signal.SIGKILL)


def finished(runs: Path, name: str) -> bool:
    return read_run(runs, name).state == "finished"


def wait_finished(runs: Path, name: str, why: str = "", alive: subprocess.Popen | None = None) -> None:
    """Until `name` ends; it must end finished (else its trainer's output says why)."""
    state = wait_until(lambda: (s := read_run(runs, name).state) in ENDED and s, 120, f"{name} to end{why}",
                       alive=alive, every=0.5)
    assert state == "finished", f"{name} {state}: {launch_log(runs, name)}"


def test_a_queued_sweep_moves_with_no_runs_page_open_and_after_a_restart(tmp_path, page, traffic, monkeypatch):
    runs, keys = tmp_path / "runs", tmp_path / "keys"  # the key folder outside the runs folder, as serve requires
    # here too: which process is a run's trainer is told by a nonce made with the dashboard's key
    monkeypatch.setenv(KEY_DIR_ENV, str(keys))
    runs.mkdir()
    port = free_port()
    url = f"http://localhost:{port}"  # serve.py listens on localhost only
    server = start_dashboard(tmp_path, runs, keys, port)
    try:
        wait_until_healthy(url, runs)
        # --- the sweep, from the Runs page's form
        page.goto(url)  # Runs is the default page
        wait_idle(page)
        open_expander(page, "🚀 Start a training run")
        for label, value in FORM.items():
            page.get_by_label(label, exact=True).fill(value)
        open_expander(page, "More options")
        for label, value in MORE.items():
            page.get_by_label(label, exact=True).fill(value)
        press(traffic, page.get_by_role("button", name="Start training"))
        # one slot: the first run starts, the other two wait in the queue (records in .launcher/, written
        # before the form's rerun)
        try:
            records = wait_until(lambda: len(recs := launch_records(runs)) == 3 and recs, 60,
                                 "the sweep's three launch records", alive=server, every=0.3)
        except AssertionError as exc:  # seen once in a full suite: what the page and the server said
            log = tmp_path / "streamlit.log"
            raise AssertionError(f"{exc}; records: {sorted(launch_records(runs))}; the page: "
                                 f"{main_text(page)[-1500:]!r}; the server: "
                                 f"{log.read_text()[-1500:] if log.exists() else ''!r}") from None
        first = [n for n, r in records.items() if r.get("pid")]
        queued = sorted((n for n, r in records.items() if r.get("queued")), key=lambda n: records[n]["queued_at"])
        assert len(first) == 1 and len(queued) == 2, records
        first, second, third = first[0], *queued

        # --- half 1: leave Runs for another page; the queue must move without it
        page.goto(f"{url}/quiz")
        expect(page.locator("h1").filter(has_text="Quiz")).to_be_visible()
        left_runs = time.time()
        # else the Runs page itself may have started the second run, and this half would prove nothing
        assert read_run(runs, first).state not in ENDED and not started(runs, second), \
            f"{first} ended before the Runs page was left: the test needs it longer"
        wait_finished(runs, first, alive=server)
        rec = wait_until(lambda: started(runs, second), 30, every=0.5, alive=server,
                         what=f"the queued {second} to start once {first} ended, with only the Quiz page open")
        assert rec["started_at"] >= left_runs, "started while the Runs page was still open"
        assert not started(runs, third)  # still one run at a time

        # --- half 2: no page at all; stop the dashboard while the third waits, start it again
        page.goto("about:blank")
        stop_server(server)
        # its scheduler ends with it (it polls every 2 s): from here nothing may start the third
        wait_until(lambda: not schedulers(runs), 30, "the scheduler to end with its dashboard", every=0.3)
        assert not started(runs, third), f"{third} started before the dashboard stopped; {second} ended too soon"
        wait_finished(runs, second, " (a trainer outlives the dashboard)")
        assert not started(runs, third) and record(runs, third).get("queued")  # the dashboard is down: it waits
        server = start_dashboard(tmp_path, runs, keys, port)  # as a user restarts it; no page is opened
        rec = wait_until(lambda: started(runs, third), 60, every=0.5, alive=server,
                         what=f"the queued {third} to start after the dashboard restarted, with no page open")
        assert process_control.is_trainer_of(rec["pid"], third, runs)  # a trainer of this run, in this folder
        stop_trainers(runs, third)  # seen starting: its training would only add a run's time to this test

        # --- what the user sees: the first two runs finished (the third was stopped above); the scheduler
        # may start the third before the restarted server listens (refused once in the full suite)
        wait_until_healthy(url, runs)
        page.goto(url)
        expect(page.get_by_text(f"Sweep {SWEEP}: 2 of 3 runs finished")).to_be_visible()
        assert finished(runs, first) and finished(runs, second)
    finally:
        if server.poll() is None:
            stop_server(server)
        stop_trainers(runs)
        for pid in schedulers(runs):  # ours (its dashboard was killed before it could end it)
            with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                os.kill(pid, signal.SIGKILL)
