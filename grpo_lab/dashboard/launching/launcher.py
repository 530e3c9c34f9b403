"""Start, stop and resume trainer processes from the dashboard.

A run is started as `python -m grpo_lab.trainer --name ... --runs-dir ...` in its own session
(start_new_session), so it outlives a page reload and a restart of the dashboard; with several
processes, through torchrun (`python -m torch.distributed.run --standalone --nproc-per-node N -m
grpo_lab.trainer ...`), which is then the process the dashboard stops. Form values go to the trainer
as an argument list, never through a shell. Validation happens before anything
starts, with the trainer's own `grpo_lab.trainer.config.from_dict`.

Each launch leaves `<runs_dir>/.launcher/<name>.json` (pid, command, time) and `<name>.log`
(the trainer's stdout and stderr): a run that dies before it creates its directory (a model that
cannot load, say) still shows up, with its output.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_lab import project_dir
from grpo_lab.dashboard import access
from grpo_lab.rundir.layout import read_json, write_json_atomic
from grpo_lab.rundir.reader import check_name, list_runs, read_run, run_path, tail
from grpo_lab.rundir.status import ACTIVE_STATES, pid_alive

LAUNCH_DIR = ".launcher"  # starts with '.', so it can never be a run name
MAX_RUNS_ENV = "GRPO_LAB_MAX_RUNS"
MAX_PROCESSES = 64  # processes on this machine (--nproc-per-node); more machines: torchrun by hand
_children: dict[int, subprocess.Popen] = {}  # processes this dashboard started, reaped when done


class LaunchError(ValueError):
    """Refused before anything started; the message says why."""


@dataclass
class Pending:
    """A launch whose run directory has no status.json yet."""

    name: str
    pid: int
    started_at: float
    alive: bool
    log: str
    queued: bool = False  # waiting for a free slot (GRPO_LAB_MAX_RUNS); started by start_queued


@functools.lru_cache(maxsize=1)
def config_fields(model: str = "tiny") -> dict[str, Any]:
    """Every trainer option with its default for `model` and its help text (trainer.config.Config);
    `by_model` marks the options whose default depends on the model (MODEL_DEFAULTS); `bounds`, the
    numbers the trainer allows (trainer.config.Bounds, or None)."""
    import dataclasses

    from grpo_lab.trainer.config import BUILTIN_MODELS, MODEL_DEFAULTS, Config

    by_model = MODEL_DEFAULTS["builtin" if model in BUILTIN_MODELS else "pretrained"]
    out = {}
    for f in dataclasses.fields(Config):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        out[f.name] = {"default": by_model.get(f.name, default), "help": f.metadata.get("help", ""),
                       "choices": f.metadata.get("choices"), "by_model": f.name in by_model,
                       "bounds": f.metadata.get("bounds")}
    return out


def free_name(runs_dir: Path, base: str = "demo") -> str:
    """`base`, or base-2, base-3, ... : the first name no run or launch uses."""
    name, n = base, 1
    while (runs_dir / name).exists() or (runs_dir / LAUNCH_DIR / f"{name}.json").exists():
        n += 1
        name = f"{base}-{n}"
    return name


def _flag_value(value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def check_processes(processes: Any) -> int:
    if isinstance(processes, bool) or not isinstance(processes, int) or not 1 <= processes <= MAX_PROCESSES:
        raise LaunchError(f"processes: must be a whole number in [1, {MAX_PROCESSES}], got {processes!r}")
    return processes


def validate(values: dict[str, Any], runs_dir: Path, processes: int = 1) -> list[str]:
    """The trainer's validation of the form values, plus "is the name free" and what several
    processes need (the trainer's own refusals, before anything starts); returns argv tail."""
    from grpo_lab.trainer.config import ConfigError, from_dict

    check_processes(processes)
    values = {k: v for k, v in values.items() if v is not None and v != ""}
    if (refused := access.check_launch(values, runs_dir)) is not None:
        raise LaunchError(refused)
    try:
        cfg = from_dict({**values, "runs_dir": str(runs_dir)}, world=processes)
    except ConfigError as exc:
        raise LaunchError(str(exc)) from None
    from grpo_lab import rewards  # light: reward code is imported only when a reward is built

    unknown = [n for n in cfg.rewards if ":" not in n and n not in rewards.available()]
    if unknown:
        raise LaunchError(f"rewards: unknown reward {unknown[0]!r}; registered rewards: {', '.join(rewards.available())}"
                          " (or name a function as 'package.module:function')")
    path = run_path(runs_dir, cfg.name)
    queued = (read_json(runs_dir / LAUNCH_DIR / f"{cfg.name}.json") or {}).get("queued")
    if path.exists() or queued or _alive_launch(runs_dir, cfg.name):
        raise LaunchError(f"name: a run named {cfg.name!r} already exists; choose another name")
    values["name"] = cfg.name
    argv = []
    for key, value in values.items():
        if key in ("runs_dir", "resume"):
            continue
        argv += [f"--{key.replace('_', '-')}", _flag_value(value)]
    return argv


def trainer_command(argv: list[str], runs_dir: Path, processes: int = 1) -> list[str]:
    """The trainer's command line: one process, or `processes` of them under torchrun on this machine."""
    launcher = [] if processes == 1 else ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                                          str(processes)]
    return [sys.executable, *launcher, "-m", "grpo_lab.trainer", *argv, "--runs-dir", str(runs_dir)]


def _start(runs_dir: Path, name: str, argv: list[str], processes: int = 1) -> int:
    folder = runs_dir / LAUNCH_DIR
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"{name}.log"
    command = trainer_command(argv, runs_dir, processes)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(command)}\n".encode())
        out.flush()
        proc = subprocess.Popen(command, cwd=project_dir(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env)
    _children[proc.pid] = proc
    write_json_atomic(folder / f"{name}.json",
                      {"name": name, "pid": proc.pid, "command": command, "processes": processes,
                       "started_at": time.time()})
    return proc.pid


def launch(values: dict[str, Any], runs_dir: Path, processes: int = 1) -> tuple[str, int]:
    """Validate, then start a new run in the background (on `processes` processes); returns
    (name, pid). With max_runs() runs already training it is queued instead (pid 0), on disk,
    and start_queued starts it."""
    argv = validate(values, runs_dir, processes)
    name = argv[argv.index("--name") + 1]
    if training(runs_dir) >= max_runs():
        folder = runs_dir / LAUNCH_DIR
        folder.mkdir(parents=True, exist_ok=True)
        write_json_atomic(folder / f"{name}.json", {"name": name, "queued": True, "argv": argv,
                                                    "processes": processes, "queued_at": time.time()})
        return name, 0
    return name, _start(runs_dir, name, argv, processes)


def max_runs() -> int:
    """How many runs may train at once (GRPO_LAB_MAX_RUNS, default 2: a trainer uses the cores it finds)."""
    try:
        return max(1, int(os.environ.get(MAX_RUNS_ENV, "2")))
    except ValueError:
        return 2


def training(runs_dir: Path) -> int:
    """Runs training now: active run directories, and launches still starting."""
    active = {r.name for r in list_runs(runs_dir) if r.state in ACTIVE_STATES}
    return len(active) + sum(1 for p in pending(runs_dir, active) if p.alive)


def start_queued(runs_dir: Path) -> list[str]:
    """Start queued launches, oldest first, while slots are free; returns the names started. The
    queue is files in .launcher/, so it outlives a dashboard restart."""
    started = []
    queued = sorted((p for p in pending(runs_dir) if p.queued), key=lambda p: p.started_at)
    for entry in queued:
        if training(runs_dir) >= max_runs():
            break
        record = read_json(runs_dir / LAUNCH_DIR / f"{entry.name}.json") or {}
        argv = record.get("argv")
        processes = record.get("processes", 1)
        if isinstance(argv, list) and all(isinstance(a, str) for a in argv) and isinstance(processes, int):
            _start(runs_dir, entry.name, argv, processes)
            started.append(entry.name)
    return started


def resume(runs_dir: Path, name: str) -> int:
    """Continue a stopped or failed run from its latest checkpoint, on as many processes as it had."""
    info = read_run(runs_dir, name)
    if info.state not in ("stopped", "failed"):
        raise LaunchError(f"{name} is {info.state}: only a stopped or failed run can be resumed")
    if info.config is None:
        raise LaunchError(f"{name} has no config.json: it never got far enough to resume")
    if _alive_launch(runs_dir, name) or is_trainer_of((info.status or {}).get("pid"), name):
        raise LaunchError(f"{name}: its trainer is still shutting down; try again in a moment")
    processes = (info.status or {}).get("world_size", 1)
    processes = processes if isinstance(processes, int) and 1 <= processes <= MAX_PROCESSES else 1
    return _start(runs_dir, name, ["--name", name, "--resume"], processes)


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        return []


def _runs_trainer_of(args: list[str], name: str) -> bool:
    named = any(a == name and i > 0 and args[i - 1] == "--name" for i, a in enumerate(args)) or f"--name={name}" in args
    # "trainer": a run this dashboard launched before the package was named grpo_lab
    return bool({"grpo_lab.trainer", "trainer"} & set(args)) and named


def is_trainer_of(pid: Any, name: str) -> bool:
    """True when `pid` is alive and is `python -m grpo_lab.trainer` for run `name`."""
    child = _children.get(pid)
    if child is not None:
        # started here: trust the Popen, since between fork and exec /proc still shows this process
        return child.poll() is None and _runs_trainer_of(list(child.args), name)
    return pid_alive(pid) and _runs_trainer_of(_cmdline(pid), name)


def stop(runs_dir: Path, name: str) -> int:
    """Ask a running trainer to stop (SIGTERM: it finishes the step, checkpoints, says stopped).
    Several processes started here: torchrun's pid, which passes the signal on to every one."""
    check_name(name)
    info = read_run(runs_dir, name)
    pid = (info.status or {}).get("pid")
    record = read_json(runs_dir / LAUNCH_DIR / f"{name}.json") or {}
    if info.status is None or (record.get("processes", 1) != 1 and is_trainer_of(record.get("pid"), name)):
        pid = record.get("pid")
    elif info.state not in ACTIVE_STATES:
        raise LaunchError(f"{name} is {info.state}: nothing to stop")
    if not is_trainer_of(pid, name):
        raise LaunchError(f"process {pid} is not the trainer of {name} (already ended?); nothing was signalled")
    os.kill(pid, signal.SIGTERM)
    return pid


def reap() -> None:
    """Collect exit codes of finished children, so none lingers as a zombie."""
    for pid, proc in list(_children.items()):
        if proc.poll() is not None:
            del _children[pid]


def _alive_launch(runs_dir: Path, name: str) -> bool:
    record = read_json(runs_dir / LAUNCH_DIR / f"{name}.json") or {}
    return is_trainer_of(record.get("pid"), name)


def pending(runs_dir: Path, listed: set[str] | frozenset[str] = frozenset()) -> list[Pending]:
    """Launches not among the `listed` runs: still starting, or died before creating their run.

    Pass the names of the runs a page already shows, so that a run moving from "launching" to
    listed is never in neither list.
    """
    reap()
    folder = runs_dir / LAUNCH_DIR
    out = []
    for record_path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        name = record_path.stem
        if name in listed:
            continue
        try:
            if not listed and run_path(runs_dir, name).is_dir():
                continue  # no listing given: a launch whose directory exists is a run now
        except ValueError:
            continue
        record = read_json(record_path) or {}
        try:
            pid = int(record.get("pid") or 0)
            started = float(record.get("started_at") or record.get("queued_at") or 0)
        except (TypeError, ValueError):
            pid, started = 0, 0.0
        out.append(Pending(name, pid, started, is_trainer_of(pid, name), tail(folder / f"{name}.log", 30),
                           queued=bool(record.get("queued")) and not pid))
    return out


def launch_log(runs_dir: Path, name: str, lines: int = 40) -> str:
    """The trainer's own stdout/stderr for a run started here ('' otherwise)."""
    check_name(name)
    return tail(runs_dir / LAUNCH_DIR / f"{name}.log", lines)


def dismiss(runs_dir: Path, name: str) -> None:
    """Forget a launch that died before creating its run (its record and output)."""
    check_name(name)
    if _alive_launch(runs_dir, name):
        raise LaunchError(f"{name} is still starting")
    for suffix in (".json", ".log"):
        (runs_dir / LAUNCH_DIR / f"{name}{suffix}").unlink(missing_ok=True)
