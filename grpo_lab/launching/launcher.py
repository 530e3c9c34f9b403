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

The runs folder may be shared or unpacked from elsewhere, so nothing read back from it is trusted:
a queued entry must carry an HMAC made with a key kept outside it (launching/keys.py) and is checked again,
as the form's values are, before it starts; a resumed run's config.json is checked the same way;
Stop signals a pid only when that process is the trainer of this very run folder (launching/identity.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_lab import project_dir
from grpo_lab.launching import allowed
from grpo_lab.launching.identity import cmdline, of_this_folder, option, runs_trainer_of
from grpo_lab.launching.keys import (KEY_DIR_ENV, MAX_ENTRY_AGE_S, NONCE_ENV, KeyDirError,  # noqa: F401
                                               check_key_dir, entry_id, entry_signed, entry_signer, entry_used,
                                               entry_state, key_dir, key_id, mark_used, queue_key, run_nonce,
                                               sign_entry)
from grpo_lab.rundir import runs_index, sweep_manifest
from grpo_lab.rundir.layout import SOURCES_KEY, read_json, valid_run_name, write_json_atomic
from grpo_lab.rundir.reader import check_name, read_run, run_path, tail_checked
from grpo_lab.rundir.status import ACTIVE_STATES, pid_alive

LAUNCH_DIR = ".launcher"  # starts with '.', so it can never be a run name
MAX_RUNS_ENV = "GRPO_LAB_MAX_RUNS"
MAX_PROCESSES = 64  # processes on this machine (--nproc-per-node); more machines: torchrun by hand
_children: dict[int, subprocess.Popen] = {}  # processes this dashboard started, reaped when done


class LaunchError(ValueError):
    """Refused before anything started; the message says why."""


@dataclass(frozen=True)
class Planned:
    """What a launch record says its run will be: the run's options as the trainer would take them
    (its parser, then its validation: trainer.config), read from the record's queued `argv` or its
    started `command`. `checked` is False when they do not pass (a planted or damaged record):
    then only `sweep` and `variant` are known, as labels from the argument list."""

    sweep: str = ""
    variant: str = ""
    checked: bool = False
    algo: str = ""
    model: str = ""
    task: str = ""
    total_steps: int = 0  # its max_steps: what its status.json will say as total_steps


@dataclass
class Pending:
    """A launch whose run directory has no status.json yet."""

    name: str
    pid: int
    started_at: float
    alive: bool
    log: str
    queued: bool = False  # waiting for a free slot (GRPO_LAB_MAX_RUNS); started by start_queued
    refused: str = ""  # a queued entry that failed its checks, and why; never started
    elsewhere: bool = False  # queued by another dashboard (another key): it starts it, this one never does
    planned: Planned = Planned()  # what its record says the run will be


@functools.lru_cache(maxsize=1)
def config_fields(model: str = "tiny", task: str | None = None) -> dict[str, Any]:
    """Every trainer option with its default for `model` (and built-in `task`: TASK_DEFAULTS) and
    its help text (trainer.config.Config); `by_model` marks the options whose default depends on the
    model or task; `bounds`, the numbers the trainer allows (trainer.config.Bounds, or None)."""
    import dataclasses

    from grpo_lab.trainer.config import BUILTIN_MODELS, MODEL_DEFAULTS, TASK_DEFAULTS, Config

    kind = "builtin" if model in BUILTIN_MODELS else "pretrained"
    # reward_params is not on the form: the trainer merges the task's values under what is sent
    by_task = {k: v for k, v in TASK_DEFAULTS.get((kind, task), {}).items() if not isinstance(v, dict)}
    by_model = MODEL_DEFAULTS[kind] | by_task
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


def checked_config(values: dict[str, Any], runs_dir: Path, processes: int = 1):
    """The checks every start goes through (form, queue, resume): data folders and reward modules
    (allowed.check_launch), the trainer's own validation and bounds (from_dict), registered reward
    names, the process count. Returns the trainer's Config; raises LaunchError with one line."""
    from grpo_lab.trainer.config import ConfigError, from_dict

    check_processes(processes)
    values = with_parent(values, runs_dir)  # a fork: its parent's options under the form's
    if (refused := allowed.check_launch(values, runs_dir)) is not None:
        raise LaunchError(refused)
    try:
        cfg = from_dict({**values, "runs_dir": str(runs_dir)}, world=processes)
        if cfg.fork_from:
            from grpo_lab.trainer import fork  # noqa: PLC0415 - as the trainer checks it

            fork.check(cfg)
    except ConfigError as exc:
        raise LaunchError(str(exc)) from None
    # and the paths as the trainer will use them: reward_params given as text, or merged with a task's defaults
    final = {option: getattr(cfg, option) for option in (*allowed.PATH_OPTIONS, "reward_params")}
    if (refused := allowed.check_launch(final, runs_dir)) is not None:
        raise LaunchError(refused)
    from grpo_lab import rewards  # light: reward code is imported only when a reward is built

    unknown = [n for n in cfg.rewards if ":" not in n and n not in rewards.available()]
    if unknown:
        raise LaunchError(f"rewards: unknown reward {unknown[0]!r}; registered rewards: {', '.join(rewards.available())}"
                          " (or name a function as 'package.module:function')")
    return cfg


def with_parent(values: dict[str, Any], runs_dir: Path) -> dict[str, Any]:
    """A fork's values (fork_from set) with its parent's options under them, as the trainer will take
    them (trainer/fork.py); a page forks only a run of its own runs folder, named. Other values as given."""
    if not values.get("fork_from"):
        return values
    from grpo_lab.trainer import fork  # noqa: PLC0415
    from grpo_lab.trainer.config import ConfigError  # noqa: PLC0415

    parent = values["fork_from"]
    if not valid_run_name(parent):
        raise LaunchError(f"fork_from: must name a run of this runs folder, got {parent!r}")
    try:
        inherited, _ = fork.parent_values({"fork_from": parent}, str(runs_dir))
    except ConfigError as exc:
        raise LaunchError(str(exc)) from None
    return {**inherited, **values}


def _argv(values: dict[str, Any]) -> list[str]:
    argv = []
    for key, value in values.items():
        if key in ("runs_dir", "resume"):
            continue
        argv += [f"--{key.replace('_', '-')}", _flag_value(value)]
    return argv


def validate(values: dict[str, Any], runs_dir: Path, processes: int = 1) -> list[str]:
    """The trainer's validation of the form values, plus "is the name free" and what several
    processes need (the trainer's own refusals, before anything starts); returns argv tail."""
    values = {k: v for k, v in values.items() if v is not None and v != ""}
    cfg = checked_config(values, runs_dir, processes)
    path = run_path(runs_dir, cfg.name)
    queued = (read_json(runs_dir / LAUNCH_DIR / f"{cfg.name}.json") or {}).get("queued")
    if path.exists() or queued or alive_launch(runs_dir, cfg.name):
        raise LaunchError(f"name: a run named {cfg.name!r} already exists; choose another name")
    values["name"] = cfg.name
    return _argv(values)


def trainer_command(argv: list[str], runs_dir: Path, processes: int = 1) -> list[str]:
    """The trainer's command line: one process, or `processes` of them under torchrun on this machine."""
    launcher = [] if processes == 1 else ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                                          str(processes)]
    return [sys.executable, *launcher, "-m", "grpo_lab.trainer", *argv, "--runs-dir", str(Path(runs_dir).resolve())]


def _launch_folder(runs_dir: Path) -> Path:
    """<runs>/.launcher, created; refused when it is not a real folder (a symlink would send the
    records and logs this dashboard writes somewhere else)."""
    folder = runs_dir / LAUNCH_DIR
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise LaunchError(f"{folder} is not a folder (a symlink?); remove it to launch from the dashboard")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _start(runs_dir: Path, name: str, argv: list[str], processes: int = 1) -> int:
    folder = _launch_folder(runs_dir)
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


def launch(values: dict[str, Any], runs_dir: Path, processes: int = 1) -> tuple[str, int]:
    """Validate, then start a new run in the background (on `processes` processes); returns
    (name, pid). With max_runs() runs already training it is queued instead (pid 0), on disk,
    and start_queued starts it."""
    argv = validate(values, runs_dir, processes)
    name = argv[argv.index("--name") + 1]
    if training(runs_dir) >= max_runs():
        _queue(runs_dir, name, argv, processes)
        return name, 0
    return name, _start(runs_dir, name, argv, processes)


def _queue(runs_dir: Path, name: str, argv: list[str], processes: int) -> None:
    """Write the queue entry of checked values, signed with this dashboard's key and named by it (keys.key_id)."""
    folder = _launch_folder(runs_dir)
    entry = {"name": name, "queued": True, "argv": argv, "processes": processes, "queued_at": time.time(),
             "id": entry_id(), "key": key_id(runs_dir)}  # signed with the rest: started once (keys.mark_used)
    write_json_atomic(folder / f"{name}.json", {**entry, "signature": sign_entry(runs_dir, entry)})


def queue_here(runs_dir: Path, name: str) -> None:
    """Take over an entry another dashboard queued (Pending.elsewhere): nothing in it is trusted; its
    argv goes through the launch form's checks again (recheck_entry: the trainer's parser,
    allowed.check_launch, the trainer's validation), and the checked values are queued signed with
    this dashboard's key, under a new id. LaunchError (one line) when refused: the entry is left as it was."""
    check_name(name)
    with queue_lock(runs_dir):
        pend = next((p for p in pending(runs_dir) if p.name == name), None)
        if pend is None or not pend.elsewhere:
            raise LaunchError(f"{name} is not waiting in another dashboard's queue")
        record = read_json(runs_dir / LAUNCH_DIR / f"{name}.json") or {}
        argv, processes = recheck_entry(runs_dir, name, record)
        _queue(runs_dir, name, argv, processes)


def max_runs() -> int:
    """How many runs may train at once (GRPO_LAB_MAX_RUNS, default 2: a trainer uses the cores it finds)."""
    try:
        return max(1, int(os.environ.get(MAX_RUNS_ENV, "2")))
    except ValueError:
        return 2


def training(runs_dir: Path) -> int:
    """Runs training now: active run directories, and launches still starting."""
    active = {r.name for r in runs_index.listing(runs_dir).active}  # looked at now: a slot is counted once
    return len(active) + sum(1 for p in pending(runs_dir, active) if p.alive)


def lock_file(runs_dir: Path, name: str):
    """`<runs>/.launcher/<name>`, opened for flock (never through a planted symlink)."""
    fd = os.open(_launch_folder(Path(runs_dir)) / name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    return open(fd, "r+")


@contextlib.contextmanager
def queue_lock(runs_dir: Path):
    """Held while the queue is read and started: the scheduler (launching/scheduler.py), the Runs
    page and grpo-lab-sweep may all call start_queued at once, and one entry must start once."""
    with lock_file(runs_dir, "queue.lock") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def start_queued(runs_dir: Path) -> list[str]:
    """Start queued launches, oldest first, while slots are free; returns the names started. The
    queue is files in .launcher/, so it outlives a dashboard restart, and anyone who can write
    there can plant an entry: one changed since this dashboard signed it is refused at once; one
    signed with another key, or none, is never started here, nor refused: another dashboard over
    the same folder (another GRPO_LAB_KEY_DIR) starts its own, and the Runs page says so and offers
    to queue it here (checked again: queue_here) or dismiss it. A signed one is checked again, as
    the form's values are, before it starts (the data folders, reward modules or limits may have
    changed since it was queued). The dashboard's scheduler calls this every few seconds, so the
    queue moves with no page open."""
    if not any(p.queued for p in pending(runs_dir)):
        return []  # nothing waits: no lock taken, no .launcher folder made
    with queue_lock(runs_dir):
        return _start_queued(runs_dir)


def _start_queued(runs_dir: Path) -> list[str]:
    started = []
    queued = sorted((p for p in pending(runs_dir) if p.queued), key=lambda p: p.started_at)
    for entry in queued:  # this dashboard's (another dashboard's wait for it: pending's `elsewhere`)
        record = read_json(runs_dir / LAUNCH_DIR / f"{entry.name}.json") or {}
        if not entry_signed(runs_dir, record) or record.get("name") != entry.name:
            _refuse(runs_dir, entry.name, record, "this queue entry was changed since this dashboard signed it (no "
                    "valid signature); it was not started")
        elif (why := replayed_or_expired(record, time.time(), runs_dir)) is not None:
            _refuse(runs_dir, entry.name, record, why)
    for entry in queued:
        if training(runs_dir) >= max_runs():
            break
        record = read_json(runs_dir / LAUNCH_DIR / f"{entry.name}.json") or {}
        if not record.get("queued") or record.get("refused"):
            continue
        try:
            argv, processes = recheck_entry(runs_dir, entry.name, record)
            if (why := replayed_or_expired(record, time.time(), runs_dir)) is not None:
                raise LaunchError(why)
            # before the start: never started twice, even after a crash (offered again once when it never started)
            mark_used(record["id"], time.time(), "retried" if entry_state(record["id"]) == "marked" else "marked")
            _start(runs_dir, entry.name, argv, processes)
            mark_used(record["id"], time.time(), "started")
        except (LaunchError, ValueError) as exc:  # ValueError: a run name refused by run_path
            _refuse(runs_dir, entry.name, record, str(exc))
            continue
        started.append(entry.name)
    return started


def never_started(runs_dir: Path, name: Any) -> bool:
    """A queued entry marked used whose trainer never started: the dashboard was killed between marking
    it and starting it. The entry still says queued (a start replaces it with the trainer's pid), and
    there is no run folder and no trainer of that name."""
    try:
        path = run_path(runs_dir, name)
    except (ValueError, TypeError):
        return False
    return not os.path.lexists(path) and not alive_launch(runs_dir, name)


def replayed_or_expired(record: dict[str, Any], now: float, runs_dir: Path | None = None) -> str | None:
    """Why a signed entry is not started, in one line: it has no id (an older dashboard's), it was
    started already (a copy put back), or it waited longer than MAX_ENTRY_AGE_S; None when it may start.
    Given `runs_dir`, an entry marked used once but never started (never_started) is offered again, once."""
    ident, queued_at = record.get("id"), record.get("queued_at")
    if not isinstance(ident, str) or not ident:
        return "this queue entry has no id (queued by an older version?); it was not started: launch it again"
    lost = (runs_dir is not None and entry_state(ident) == "marked" and record.get("queued") is True
            and never_started(runs_dir, record.get("name")))
    if entry_used(ident) and not lost:
        return "this queue entry was started once already (a copy put back?); a queue entry starts one run, once"
    if not isinstance(queued_at, (int, float)) or not 0 <= now - queued_at <= MAX_ENTRY_AGE_S:
        return (f"this queue entry expired: queued more than {MAX_ENTRY_AGE_S // 86400} days ago (or at no valid "
                "time); it was not started: launch it again")
    return None


def recheck_entry(runs_dir: Path, name: str, record: dict[str, Any]) -> tuple[list[str], int]:
    """A queued entry's argv read back into values with the trainer's own parser, then through
    checked_config; returns the argv to start (rebuilt from the checked values) and the count."""
    argv, processes = record.get("argv"), record.get("processes", 1)
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise LaunchError("argv: must be a list of strings")
    values = parse_trainer_args(argv)
    for option in ("config", "runs_dir", "resume"):  # the form never queues these
        if option in values:
            raise LaunchError(f"{option}: not something the launch form queues")
    cfg = checked_config(values, runs_dir, processes)
    if cfg.name != name:
        raise LaunchError(f"name: the entry {name}.json starts a run named {cfg.name!r}")
    if os.path.lexists(run_path(runs_dir, name)):  # lexists: a dangling link is taken too
        raise LaunchError(f"name: a run named {name!r} already exists")
    return _argv(values), processes


def parse_trainer_args(argv: list[str]) -> dict[str, Any]:
    """The values an argument list gives the trainer (its own parser; the options given only).
    LaunchError (one line) when it refuses them, or when they ask for its help (argparse would
    print it and end the process: a scheduler, a page's script)."""
    from grpo_lab.trainer.config import ConfigError, build_parser

    if "-h" in argv or "--help" in argv:  # asked before parsing: argparse prints the help where the page runs
        raise LaunchError("argv: asks for the trainer's help, which starts no run")
    try:
        parsed = vars(build_parser().parse_args(argv))
    except ConfigError as exc:
        raise LaunchError(str(exc)) from None
    except SystemExit:  # any other action that ends the process
        raise LaunchError("argv: asks the trainer for something that starts no run") from None
    return {k: v for k, v in parsed.items() if v is not None}


def _refuse(runs_dir: Path, name: str, record: dict[str, Any], reason: str) -> None:
    """Mark a queued entry refused (shown by pending and launch_log), so it is never started."""
    write_json_atomic(runs_dir / LAUNCH_DIR / f"{name}.json",
                      {**record, "name": name, "queued": False, "pid": 0, "refused": reason})


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
    return _start(runs_dir, name, ["--name", name, "--resume"], processes)


def check_resume(runs_dir: Path, name: str, config: dict[str, Any], processes: int = 1) -> None:
    """The saved options of run `name` as a launch would check them; LaunchError naming the first
    refused option (prefixed 'resume refused')."""
    # a fork resumes from its own checkpoints: its parent may have gone (fork_from, fork_step left out)
    values = {k: v for k, v in config.items() if k not in (SOURCES_KEY, "runs_dir", "resume", "name", "fork_from",
                                                           "fork_step")}
    try:
        checked_config({**values, "name": name}, runs_dir, processes)
    except LaunchError as exc:
        raise LaunchError(f"resume refused: config.json of {name}: {exc}") from None
    check_variant(runs_dir, name, config)


def check_variant(runs_dir: Path, name: str, config: dict[str, Any]) -> None:
    """A run of a sweep resumes only as the variant it was planned as (rundir/sweep_manifest.py):
    LaunchError naming the options its config.json changed since. A sweep without a manifest (queued
    before manifests) cannot be checked, and passes."""
    sweep = config.get("sweep")
    entry, problem = sweep_manifest.planned(runs_dir, sweep, name)
    if problem:
        raise LaunchError(f"resume refused: {name}: its sweep's manifest cannot be read: {problem}")
    if entry is None:
        return
    keys = sweep_manifest.differing(entry["options"], {**config, "name": name})
    if keys:
        shown = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
        raise LaunchError(f"resume refused: config.json of {name} no longer matches its variant "
                          f"{str(entry.get('variant'))[:80]!r} of sweep {sweep!r}: {shown} differ "
                          f"({sweep_manifest.FOLDER}/{sweep}.json)")


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


def stop(runs_dir: Path, name: str) -> int:
    """Ask a running trainer to stop (SIGTERM: it finishes the step, checkpoints, says stopped).
    Several processes started here: torchrun's pid, which passes the signal on to every one."""
    check_name(name)
    info = read_run(runs_dir, name)
    pid = (info.status or {}).get("pid")
    record = read_json(runs_dir / LAUNCH_DIR / f"{name}.json") or {}
    if info.status is None or (record.get("processes", 1) != 1 and is_trainer_of(record.get("pid"), name, runs_dir)):
        pid = record.get("pid")
    elif info.state not in ACTIVE_STATES:
        raise LaunchError(f"{name} is {info.state}: nothing to stop")
    if not is_trainer_of(pid, name, runs_dir):
        raise LaunchError(f"process {pid} is not the trainer of {name} in {runs_dir} (already ended?); "
                          "nothing was signalled")
    os.kill(pid, signal.SIGTERM)
    return pid


def reap() -> None:
    """Collect exit codes of finished children, so none lingers as a zombie."""
    for pid, proc in list(_children.items()):
        if proc.poll() is not None:
            del _children[pid]


def alive_launch(runs_dir: Path, name: str) -> bool:
    record = read_json(runs_dir / LAUNCH_DIR / f"{name}.json") or {}
    return is_trainer_of(record.get("pid"), name, runs_dir)


def record_names(runs_dir: Path) -> list[str]:
    """The runs with a launch record, sorted: one listing of the folder, names compared as text, and only
    names a run can have (write_json_atomic's .tmp-*.json mid-write, or a planted file, are no launch)."""
    try:
        names = sorted(e.name[:-5] for e in os.scandir(Path(runs_dir) / LAUNCH_DIR) if e.name.endswith(".json"))
    except OSError:
        return []
    return [n for n in names if valid_run_name(n)]


def pending(runs_dir: Path, listed: set[str] | frozenset[str] | None = None) -> list[Pending]:
    """Launches not among the `listed` runs: still starting, or died before creating their run.

    Pass the names of the runs a page already shows, so that a run moving from "launching" to
    listed is never in neither list; an empty set is a listing too (nothing shown). None: no
    listing, a launch whose run directory exists counts as a run.
    """
    reap()
    folder = runs_dir / LAUNCH_DIR
    runs = listed if listed is not None else _run_folders(runs_dir)
    names = [n for n in record_names(runs_dir) if n not in runs]
    out = []
    for name in names:
        record_path = folder / f"{name}.json"
        try:
            if listed is None and run_path(runs_dir, name).is_dir():
                continue  # no listing given: a launch whose directory exists is a run now
        except ValueError:
            pass  # its folder is a link leading out of the runs folder (or nowhere): listed, so that
            # start_queued refuses it with the reason (run_path's) instead of leaving it "queued"
        record = read_json(record_path) or {}
        try:
            pid = int(record.get("pid") or 0)
            started = float(record.get("started_at") or record.get("queued_at") or 0)
        except (TypeError, ValueError):
            pid, started = 0, 0.0
        refused = str(record.get("refused") or "")
        waiting = bool(record.get("queued")) and not pid and not refused
        elsewhere = waiting and _signer(runs_dir, record) == "other"
        out.append(Pending(name, pid, started, is_trainer_of(pid, name, runs_dir),
                           f"refused: {refused}" if refused else launch_log(runs_dir, name, 30),
                           queued=waiting and not elsewhere, refused=refused, elsewhere=elsewhere,
                           planned=planned(record)))
    return out


def planned(record: dict[str, Any]) -> Planned:
    """What a launch record (`<runs>/.launcher/<name>.json`, read) says its run will be: its queued
    `argv`, else the trainer's arguments in its started `command`, through the trainer's parser and
    validation (the checks a queued entry meets again before it starts, bar the ones about files)."""
    argv = record.get("argv") if record.get("argv") is not None else _trainer_args(record.get("command"))
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return Planned()
    labels = {"sweep": str(option(argv, "--sweep") or ""), "variant": str(option(argv, "--variant") or "")}
    return Planned(**labels, **_checked_plan(tuple(argv)))


def _trainer_args(command: Any) -> list[str] | None:
    """The trainer's own arguments in a started command (`... -m grpo_lab.trainer ARGS`, under torchrun too)."""
    if not isinstance(command, list):
        return None
    for i in range(len(command) - 1):
        if command[i] == "-m" and command[i + 1] in ("grpo_lab.trainer", "trainer"):
            return command[i + 2:]
    return None


@functools.lru_cache(maxsize=1024)
def _checked_plan(argv: tuple[str, ...]) -> dict[str, Any]:
    """Planned's checked fields for one argument list ({} when the trainer refuses it); cached, as
    the Runs page asks at every refresh of the same queue."""
    from grpo_lab.trainer.config import from_dict

    try:
        values = parse_trainer_args(list(argv))
        if "config" in values or "resume" in values:  # a file to read, a run to continue: no plan to show
            return {}
        cfg = from_dict({k: v for k, v in values.items() if k != "runs_dir"})
    except (ValueError, TypeError):  # LaunchError and ConfigError are ValueErrors
        return {}
    return {"checked": True, "algo": cfg.algo, "model": cfg.model, "task": cfg.task, "total_steps": cfg.max_steps}


def _run_folders(runs_dir: Path) -> set[str]:
    """The names of the real folders in runs_dir (a link is left to run_path, which judges where it leads)."""
    try:
        return {e.name for e in os.scandir(runs_dir) if e.is_dir(follow_symlinks=False)}
    except OSError:
        return set()


def _signer(runs_dir: Path, record: dict[str, Any]) -> str:
    """keys.entry_signer; "this" while the key folder is unusable: start_queued then says why in one line."""
    try:
        return entry_signer(runs_dir, record)
    except (KeyDirError, ValueError, OSError):
        return "this"


def launch_log(runs_dir: Path, name: str, lines: int = 40) -> str:
    """The trainer's own stdout/stderr for a run started here ('' otherwise); for a refused queue
    entry, why; for a log that is not a regular file in .launcher/, one line saying so."""
    check_name(name)
    refused = (read_json(runs_dir / LAUNCH_DIR / f"{name}.json") or {}).get("refused")
    if refused:
        return f"refused: {refused}"
    text, problem = tail_checked(runs_dir / LAUNCH_DIR / f"{name}.log", lines)
    return problem or text


def dismiss(runs_dir: Path, name: str) -> None:
    """Forget a launch that died before creating its run (its record and output)."""
    check_name(name)
    if alive_launch(runs_dir, name):
        raise LaunchError(f"{name} is still starting")
    for suffix in (".json", ".log"):
        (runs_dir / LAUNCH_DIR / f"{name}{suffix}").unlink(missing_ok=True)
