"""The queue's scheduler: starts queued launches whenever a slot is free, with no page open.

`grpo-lab-dashboard` (serve.py) starts one beside the server: `python -m
grpo_lab.launching.scheduler --runs-dir R --parent PID`. It lives as long as the
dashboard process PID and every POLL_S seconds calls launch_queue.start_queued, which checks each
entry's signature (the dashboard's key, launching/keys.py) and the launch checks again: the
scheduler is the dashboard's own code with the dashboard's key, so nothing unsigned starts.

One scheduler per runs folder and key: it holds an exclusive lock on
`<runs>/.launcher/scheduler-<key id>.lock` (keys.key_id) while it works. A second dashboard over
the same folder with the same key folder starts one too, which waits for the lock and takes over
when the first dashboard (and so its scheduler) ends. A dashboard with another key folder
(GRPO_LAB_KEY_DIR) cannot start the first one's entries, so its scheduler has a lock of its own:
each starts what its dashboard queued (one shared lock would leave one queue waiting for good).
The queue is files, so a restarted dashboard's scheduler starts what an earlier one queued.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import sys
import time
from pathlib import Path
from typing import IO

from grpo_lab.launching import form_checks, launch_queue, launch_records
from grpo_lab.launching.keys import KeyDirError, key_id

POLL_S = 2.0  # how soon a free slot is filled


def try_lock(runs_dir: Path) -> IO | None:
    """The open lock file when this process now holds the scheduler lock of the runs folder and this
    dashboard's key; None when another process holds it, or when nothing was ever queued here (no
    .launcher folder: none is made for a folder only read). The lock goes with the file (closed, or
    the process ended). KeyDirError when the key folder may not be used."""
    if not (Path(runs_dir) / launch_records.LAUNCH_DIR).is_dir():
        return None
    handle = launch_records.lock_file(runs_dir, f"scheduler-{key_id(Path(runs_dir))}.lock")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def serve(runs_dir: Path, parent: int, poll: float = POLL_S) -> None:
    """Start queued runs while `parent` (the dashboard) lives; wait for the lock while another holds it."""
    held, said = None, ""
    while os.getppid() == parent:  # reparented: the dashboard ended, and so does its scheduler
        try:
            held = held or try_lock(runs_dir)
            if held is not None:
                launch_queue.start_queued(runs_dir)
            said = ""
        except (OSError, form_checks.LaunchError, KeyDirError) as exc:  # a bad moment, not the end
            if str(exc) != said:  # once, not every poll
                print(f"grpo-lab scheduler: {runs_dir}: {exc}", file=sys.stderr)
            said = str(exc)
        time.sleep(poll)


def start(runs_dir: Path) -> int:
    """Start the scheduler for this process (the dashboard) in the background; returns its pid."""
    import subprocess

    command = [sys.executable, "-m", "grpo_lab.launching.scheduler", "--runs-dir",
               str(Path(runs_dir).resolve()), "--parent", str(os.getpid())]
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True).pid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grpo_lab.launching.scheduler", description=__doc__.split("\n")[0])
    parser.add_argument("--runs-dir", required=True, help="the runs folder whose queue to serve")
    parser.add_argument("--parent", type=int, required=True, help="the dashboard's pid: the scheduler ends with it")
    args = parser.parse_args(argv)
    serve(Path(args.runs_dir), args.parent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
