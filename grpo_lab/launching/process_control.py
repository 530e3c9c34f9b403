"""Start, stop and resume trainer processes, and tell whether a pid is the trainer of a run.

A run starts in its own session (start_new_session), so it outlives a page reload and a restart of the
dashboard; with several processes under torchrun, which is then the process Stop signals. Stop signals a
pid only when that process is the trainer of this very run folder (launching/identity.py): a pid read
from a status.json or a launch record is input, and may name any process on the machine.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

from grpo_lab import project_dir
from grpo_lab.launching.commands import trainer_command
from grpo_lab.launching.form_checks import MAX_PROCESSES, LaunchError, check_resume
from grpo_lab.launching.identity import cmdline, of_this_folder, option, runs_trainer_of
from grpo_lab.launching.keys import NONCE_ENV, run_nonce
from grpo_lab.launching.launch_records import launch_folder, read_record, record_path
from grpo_lab.rundir.layout import write_json_atomic
from grpo_lab.rundir.reader import check_name, read_run
from grpo_lab.rundir.status import ACTIVE_STATES, pid_alive

_children: dict[int, subprocess.Popen] = {}  # processes this dashboard started, reaped when done


def start_process(runs_dir: Path, name: str, argv: list[str], processes: int = 1) -> int:
    """Start the trainer with checked `argv` in the background, its output to `.launcher/<name>.log`,
    and write its launch record; returns its pid (torchrun's, with several processes)."""
    folder = launch_folder(runs_dir)
    log = folder / f"{name}.log"
    command = trainer_command(argv, runs_dir, processes)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", NONCE_ENV: run_nonce(runs_dir, name)}
    try:  # O_NOFOLLOW: a planted symlink must not make us append to a file outside the folder
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as exc:
        raise LaunchError(f"{log}: cannot write the trainer's output there ({exc.strerror}); remove it") from None
    with open(fd, "ab") as out:
        if not stat.S_ISREG(os.fstat(out.fileno()).st_mode):
            raise LaunchError(f"{log} is not a regular file; remove it")
        out.write(f"\n$ {' '.join(command)}\n".encode())
        out.flush()
        proc = subprocess.Popen(command, cwd=project_dir(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env)
    _children[proc.pid] = proc
    write_json_atomic(folder / f"{name}.json",
                      {"name": name, "pid": proc.pid, "command": command, "processes": processes,
                       "started_at": time.time()})
    return proc.pid


def is_trainer_of(pid: Any, name: str, runs_dir: Path | None = None) -> bool:
    """True when `pid` is alive and is `python -m grpo_lab.trainer` for run `name` (directly or under
    torchrun); given `runs_dir`, also that it trains the run in that folder, not a namesake elsewhere."""
    child = _children.get(pid)
    if child is not None:
        # started here: trust the Popen, since between fork and exec /proc still shows this process
        args = list(child.args)
        return (child.poll() is None and runs_trainer_of(args, name)
                and (runs_dir is None or Path(option(args, "--runs-dir") or "").resolve() == Path(runs_dir).resolve()))
    if not (pid_alive(pid) and runs_trainer_of(cmdline(pid), name)):
        return False
    return runs_dir is None or of_this_folder(pid, name, runs_dir)


def alive_launch(runs_dir: Path, name: str) -> bool:
    """Whether the pid of `name`'s launch record is its trainer, still running (still starting, or training)."""
    return is_trainer_of(read_record(runs_dir, name).get("pid"), name, runs_dir)


def reap() -> None:
    """Collect exit codes of finished children, so none lingers as a zombie."""
    for pid, proc in list(_children.items()):
        if proc.poll() is not None:
            del _children[pid]


def stop(runs_dir: Path, name: str) -> int:
    """Ask a running trainer to stop (SIGTERM: it finishes the step, checkpoints, says stopped).
    Several processes started here: torchrun's pid, which passes the signal on to every one."""
    check_name(name)
    info = read_run(runs_dir, name)
    pid = (info.status or {}).get("pid")
    record = read_record(runs_dir, name)
    if info.status is None or (record.get("processes", 1) != 1 and is_trainer_of(record.get("pid"), name, runs_dir)):
        pid = record.get("pid")
    elif info.state not in ACTIVE_STATES:
        raise LaunchError(f"{name} is {info.state}: nothing to stop")
    if not is_trainer_of(pid, name, runs_dir):
        raise LaunchError(f"process {pid} is not the trainer of {name} in {runs_dir} (already ended?); "
                          "nothing was signalled")
    os.kill(pid, signal.SIGTERM)
    return pid


def resume(runs_dir: Path, name: str) -> int:
    """Continue a stopped or failed run from its latest checkpoint, on as many processes as it had.
    Its config.json goes through the launch checks first: a run folder may come from elsewhere."""
    info = read_run(runs_dir, name)
    if info.state not in ("stopped", "failed"):
        raise LaunchError(f"{name} is {info.state}: only a stopped or failed run can be resumed")
    if info.config is None:
        raise LaunchError(f"{name} has no config.json: it never got far enough to resume")
    if alive_launch(runs_dir, name) or is_trainer_of((info.status or {}).get("pid"), name, runs_dir):
        raise LaunchError(f"{name}: its trainer is still shutting down; try again in a moment")
    processes = (info.status or {}).get("world_size", 1)
    processes = processes if isinstance(processes, int) and 1 <= processes <= MAX_PROCESSES else 1
    check_resume(runs_dir, name, info.config, processes)
    return start_process(runs_dir, name, ["--name", name, "--resume"], processes)


def dismiss(runs_dir: Path, name: str) -> None:
    """Forget a launch that died before creating its run (its record and output)."""
    check_name(name)
    if alive_launch(runs_dir, name):
        raise LaunchError(f"{name} is still starting")
    for suffix in (".json", ".log"):
        record_path(runs_dir, name, suffix).unlink(missing_ok=True)
