"""Run untrusted Python in a separate, limited process; never hang, never harm the trainer.

Layers (rewards/README.md says what each does and does not stop):
- a fresh `python -I -S` process in its own session, working directory = a new temporary
  directory, a clean environment, stdin closed;
- as root: the child runs as an unprivileged user (default `nobody`), and in its own network
  namespace when `unshare` is available (no network at all);
- rlimits set by the child before the untrusted code runs: CPU seconds, address space, file
  size (caps output too), no core dumps, process count;
- an audit hook (rewards/_sandbox_child.py): no writes outside the working directory, no
  fork/exec/subprocess, no sockets, no ctypes;
- the parent's wall-time limit, after which the whole process group is killed.

>>> result = run_python("print(6 * 7)", [{"code": "assert 6 * 7 == 42", "test": True}], Limits())
>>> result.passed, result.total, result.timed_out
(1, 1, False)
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

_CHILD_SOURCE = (Path(__file__).parent / "_sandbox_child.py").read_text()
_CLEAN_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
_PROBE = "import json, resource, signal, os; print(os.getuid())"


@dataclass(frozen=True)
class Limits:
    wall_s: float = 5.0  # killed after this many seconds of wall time
    cpu_s: int = 5  # CPU seconds (a backstop should the parent die)
    memory_mb: int = 512  # address space
    file_bytes: int = 1 << 20  # largest file the child may write; its stdout+stderr is one
    nproc: int = 64  # processes (the audit hook already refuses fork)


@dataclass(frozen=True)
class Isolation:
    python: str  # the interpreter the child runs
    prefix: tuple[str, ...] = ()  # e.g. unshare --net --setuid ... --
    popen_user: dict = field(default_factory=dict)  # user=/group= when switching without unshare
    uid: int | None = None  # the unprivileged user the child runs as; None: the trainer's own
    gid: int | None = None
    description: str = ""


@dataclass(frozen=True)
class RunResult:
    passed: int
    total: int
    loaded: bool  # the program itself ran without raising
    finished: bool  # every step ran (not killed, no broken setup)
    timed_out: bool
    returncode: int
    seconds: float
    output: str  # the tail of stdout+stderr, for error messages


def resolve_isolation(
    python: str | None = None, user: str | int | None = "nobody", network_namespace: bool = True
) -> Isolation:
    """The strongest isolation this machine allows, checked by actually starting a child.

    As root with `user` set, the child must run as that user, so the interpreter must be
    readable by it (a virtualenv under /root is not): `python` if given, else the first of
    sys.executable, /usr/bin/python3, /usr/local/bin/python3 that works.
    """
    return _resolve(python, user, network_namespace)


@lru_cache(maxsize=8)
def _resolve(python, user, network_namespace) -> Isolation:
    candidates = [python] if python else [sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"]
    candidates = [c for c in dict.fromkeys(candidates) if c and os.path.exists(c)]
    if os.geteuid() != 0 or user is None:
        for exe in candidates:
            if _probe(Isolation(exe)):
                return Isolation(exe, description=f"same user (uid {os.geteuid()}), audit hook, rlimits")
        raise ValueError(f"sandbox: no working Python interpreter among {candidates}")
    uid, gid, name = _user_ids(user)
    options = []
    if network_namespace and shutil.which("unshare"):
        unshare = (shutil.which("unshare"), "--net", f"--setuid={uid}", f"--setgid={gid}", "--")
        described = f"user {name}, own network namespace, audit hook, rlimits"
        options.append((unshare, {}, described))
    switch = {"user": uid, "group": gid, "extra_groups": []}
    options.append(((), switch, f"user {name}, audit hook (no network namespace), rlimits"))
    for prefix, popen_user, description in options:
        for exe in candidates:
            isolation = Isolation(exe, prefix, popen_user, uid, gid, description)
            if _probe(isolation, expect_uid=uid):
                return isolation
    raise ValueError(
        f"sandbox: no Python interpreter among {candidates} can run as user {name!r};"
        " pass python=<an interpreter that user can read>, or user=None to accept weaker isolation"
    )


def _user_ids(user: str | int) -> tuple[int, int, str]:
    """(uid, gid, name); a bare uid without a passwd entry gets the group of the same number."""
    try:
        entry = pwd.getpwuid(user) if isinstance(user, int) else pwd.getpwnam(user)
    except KeyError:
        if isinstance(user, int):
            return user, user, str(user)
        raise ValueError(f"sandbox: no such user {user!r}; pass user=<a name or uid>") from None
    return entry.pw_uid, entry.pw_gid, entry.pw_name


def _probe(isolation: Isolation, expect_uid: int | None = None) -> bool:
    try:
        done = subprocess.run(
            [*isolation.prefix, isolation.python, "-I", "-S", "-c", _PROBE],
            env=_CLEAN_ENV, cwd="/", stdin=subprocess.DEVNULL, capture_output=True,
            timeout=30, **isolation.popen_user,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    if done.returncode != 0:
        return False
    return expect_uid is None or done.stdout.strip() == str(expect_uid).encode()


def run_python(
    program: str, steps: list[dict], limits: Limits, isolation: Isolation | None = None
) -> RunResult:
    """Run `program`, then each step ({"code": str, "test": bool}) in the same namespace.

    A test passes when its code runs without raising. Tests after a kill (time, memory, a
    broken setup step) count as failed.
    """
    isolation = isolation or resolve_isolation()
    total = sum(1 for s in steps if s["test"])
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="reward-sandbox-", ignore_cleanup_errors=True) as tmp:
        read_fd, write_fd = os.pipe()
        try:
            job = {"program": program, "steps": steps, "report_fd": write_fd,
                   "limits": {**asdict(limits), "dedicated_user": isolation.uid is not None}}
            Path(tmp, "job.json").write_text(json.dumps(job))
            if isolation.uid is not None:
                os.chown(tmp, isolation.uid, isolation.gid)  # its only writable place
            with open(Path(tmp, "output.txt"), "wb") as output:
                proc = subprocess.Popen(
                    [*isolation.prefix, isolation.python, "-I", "-S", "-c", _CHILD_SOURCE],
                    cwd=tmp, env={**_CLEAN_ENV, "HOME": tmp, "TMPDIR": tmp},
                    stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                    pass_fds=(write_fd,), start_new_session=True, **isolation.popen_user,
                )
            os.close(write_fd)
            write_fd = -1
            timed_out = _wait(proc, limits.wall_s)
            report = _read_available(read_fd, limit=4 + total)
        finally:
            os.close(read_fd)
            if write_fd >= 0:
                os.close(write_fd)
        output_tail = _tail(Path(tmp, "output.txt"))
    passed = report[1:].count(b"1") if report[:1] == b"S" else 0
    return RunResult(
        passed=min(passed, total), total=total, loaded=report[:1] == b"S",
        finished=report.endswith(b"."), timed_out=timed_out, returncode=proc.returncode,
        seconds=time.monotonic() - start, output=output_tail,
    )


def _wait(proc: subprocess.Popen, wall_s: float) -> bool:
    """Wait up to wall_s, then kill the child's whole session; True if it had to be killed."""
    timed_out = False
    try:
        proc.wait(timeout=wall_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    # Also after a normal exit: anything the child left behind in its group goes too.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    return timed_out


def _read_available(fd: int, limit: int) -> bytes:
    # Non-blocking: a grandchild that escaped the kill could keep the pipe open forever.
    os.set_blocking(fd, False)
    data = b""
    while len(data) < limit:
        try:
            chunk = os.read(fd, limit - len(data))
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    return data


def _tail(path: Path, size: int = 2000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, path.stat().st_size - size))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""

