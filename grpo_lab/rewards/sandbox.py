"""Run untrusted Python in a bubblewrap sandbox; never hang, never harm the trainer.

What the child gets (grpo_lab/rewards/README.md says what this does and does not stop):
- bubblewrap (`bwrap`): its own user, pid, network, ipc and uts namespaces and its own
  session; a root file system of read-only binds (/usr, /lib*, the interpreter's prefix, the
  dynamic linker's cache) with its own /proc and /dev; one writable place, a fresh temporary
  directory mounted as /tmp (its working directory and HOME); no home, no network, no other
  process in sight; it dies with the process that started it;
- as root, the sandbox itself runs as an unprivileged user (default `nobody`);
- a fresh `python -I -S` (standard library only), a clean environment, stdin closed;
- rlimits set by the child before the untrusted code runs: CPU seconds, address space, file
  size (caps output too), no core dumps, process count;
- the parent's wall-time limit, after which the sandbox's pid 1 is killed: the kernel then
  kills every process left in its pid namespace.

Without a working bwrap, untrusted code is refused unless the user opts in with
`allow_unsandboxed=True` or GRPO_LAB_ALLOW_UNSANDBOXED=1: then only the limits, the user
switch as root and an audit hook against accidents (not attacks) remain.

>>> result = run_python("print(6 * 7)", [{"code": "assert 6 * 7 == 42", "test": True}], Limits())
>>> result.passed, result.total, result.timed_out
(1, 1, False)
"""

from __future__ import annotations

import json
import os
import pwd
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

ALLOW_UNSANDBOXED_ENV = "GRPO_LAB_ALLOW_UNSANDBOXED"
_CHILD_SOURCE = (Path(__file__).parent / "_sandbox_child.py").read_text()
_CLEAN_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
_PROBE = "import json, resource, signal, os; print(os.getuid())"
# What an interpreter needs besides /usr and its own prefix; nothing else of /etc is visible.
_SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/localtime")


@dataclass(frozen=True)
class Limits:
    wall_s: float = 5.0  # killed after this many seconds of wall time
    cpu_s: int = 5  # CPU seconds (a backstop should the parent die)
    memory_mb: int = 512  # address space
    file_bytes: int = 1 << 20  # largest file the child may write; its stdout+stderr is one
    nproc: int = 64  # processes (in the sandbox's own user namespace: its processes only)


@dataclass(frozen=True)
class Isolation:
    python: str  # the interpreter the child runs
    bwrap: tuple[str, ...] = ()  # bwrap and its options; () runs unsandboxed (opted in)
    setpriv: tuple[str, ...] = ()  # as root: setpriv --reuid=... --, the switch to `user`
    popen_user: dict = field(default_factory=dict)  # the same where setpriv is missing
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


# A process that scores for others (the dashboard) installs the check that every interpreter a reward
# names must pass before this module starts it (in the sandbox: nothing is run to learn how to sandbox
# it, library_prefixes). The trainer and the command lines, started by the person at the machine, install
# none; they hold what a run's own files name to the same rule (rewards/programs.py).
_program_check: Callable[[str], str | None] | None = None


def set_program_check(check: Callable[[str], str | None] | None) -> None:
    """check(path) -> None to allow, or one line saying why not; None removes the check."""
    global _program_check
    _program_check = check


def resolve_isolation(
    python: str | None = None, user: str | int | None = "nobody", allow_unsandboxed: bool = False
) -> Isolation:
    """The bubblewrap sandbox, checked by actually starting a child in it; a one-line
    ValueError if it cannot start, unless unsandboxed running is allowed (here or by
    GRPO_LAB_ALLOW_UNSANDBOXED=1).

    As root with `user` set, the sandbox runs as that user, so the interpreter must be
    readable by it (one under /root is not): `python` if given, else the first of
    sys.executable, /usr/bin/python3, /usr/local/bin/python3 that works.
    """
    if python is not None and _program_check is not None and (refused := _program_check(str(python))):
        raise ValueError(f"sandbox: {refused}")
    allow = allow_unsandboxed or os.environ.get(ALLOW_UNSANDBOXED_ENV, "") not in ("", "0")
    return _resolve(python, user, bool(allow), shutil.which("bwrap"))


@lru_cache(maxsize=8)
def _resolve(python, user, allow_unsandboxed, bwrap) -> Isolation:
    candidates = [python] if python else [sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"]
    candidates = [os.path.realpath(c) for c in candidates if c and os.path.exists(c)]
    candidates = list(dict.fromkeys(candidates))  # the venv's python is its base interpreter
    uid = gid = None
    setpriv, popen_user, who = (), {}, f"uid {os.geteuid()}"
    if os.geteuid() == 0 and user is not None:
        uid, gid, who = _user_ids(user)
        # setpriv switches in the program it runs; Popen(user=...) would switch in the forked
        # trainer, which cannot use vfork then: 40 ms per sandbox with a 2 GB heap, not 2.
        if path := shutil.which("setpriv"):
            setpriv = (path, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--")
        else:
            popen_user = {"user": uid, "group": gid, "extra_groups": []}
    problem = "bwrap (Debian package bubblewrap) is not installed"
    if bwrap:
        for exe in candidates:
            isolation = Isolation(exe, _bwrap_options(bwrap, exe), setpriv, popen_user, uid, gid,
                                  f"bubblewrap sandbox as {who}")
            problem = _probe(isolation)
            if problem is None:
                return isolation
    if allow_unsandboxed:
        for exe in candidates:
            isolation = Isolation(exe, (), setpriv, popen_user, uid, gid,
                                  f"UNSANDBOXED as {who}: rlimits and an audit hook only")
            if _probe(isolation) is None:
                return isolation
    raise ValueError(
        f"sandbox: cannot isolate untrusted code ({problem}); install bubblewrap and allow user"
        f" namespaces, or accept running it unsandboxed with allow_unsandboxed=True or"
        f" {ALLOW_UNSANDBOXED_ENV}=1"
    )


def _bwrap_options(bwrap: str, python: str) -> tuple[str, ...]:
    args = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session",
            # The program is pid 1: when it exits, the kernel kills what it left behind, and
            # bwrap reaps it (a separate init would be left to the host's pid 1 to reap).
            "--as-pid-1",
            "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]
    for path in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(path):  # merged /usr: /lib -> usr/lib
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    bound = ["/usr"]
    for path in [*_SYSTEM_FILES, *library_prefixes(python), python]:
        if os.path.exists(path) and not any(path == b or path.startswith(b + "/") for b in bound):
            args += ["--ro-bind", path, path]
            bound.append(path)
    return tuple(args)


def library_prefixes(python: str) -> list[str]:
    """Where an interpreter's standard library lives, read from the file layout, never by running it (a
    program named in a run's files would run unsandboxed, as this user, to answer): PREFIX for
    PREFIX/bin/pythonX.Y beside a PREFIX/lib/pythonX.Y/ (CPython's layout: /usr/local, pyenv, a
    python-build-standalone), and for a virtual environment's copied interpreter the `home` its
    pyvenv.cfg names, the same way. An interpreter of no known layout gets nothing: the probe inside the
    sandbox then fails, and the sandbox says it cannot start.

    >>> import sys, os
    >>> library_prefixes(os.path.realpath(sys.executable)) in ([sys.base_prefix], [])
    True
    """
    exe = Path(python)
    found, seen = [], set()
    bins = [exe.parent]
    for cfg in (exe.parent / "pyvenv.cfg", exe.parent.parent / "pyvenv.cfg"):
        try:
            lines = cfg.read_text(errors="replace").splitlines()[:50] if cfg.is_file() else []
        except OSError:
            lines = []
        bins += [Path(v.strip()) for k, _, v in (line.partition("=") for line in lines) if k.strip() == "home"]
    for folder in bins:
        prefix = folder.parent
        if folder.name != "bin" or prefix == Path("/") or str(prefix) in seen:
            continue
        if any(p.is_dir() and (p / "os.py").is_file() for p in (prefix / "lib").glob("python3*")):
            seen.add(str(prefix))
            found.append(str(prefix))
    return [p for p in found if not (p == "/usr" or p.startswith("/usr/"))]


def _user_ids(user: str | int) -> tuple[int, int, str]:
    """(uid, gid, name); a bare uid without a passwd entry gets the group of the same number."""
    try:
        entry = pwd.getpwuid(user) if isinstance(user, int) else pwd.getpwnam(user)
    except KeyError:
        if isinstance(user, int):
            return user, user, str(user)
        raise ValueError(f"sandbox: no such user {user!r}; pass user=<a name or uid>") from None
    return entry.pw_uid, entry.pw_gid, f"user {entry.pw_name}"


def _command(isolation: Isolation, workdir: str) -> list[str]:
    if not isolation.bwrap:
        return [*isolation.setpriv, isolation.python, "-I", "-S"]
    # The workdir is the only writable place: bwrap's own root (a tmpfs) goes read-only last.
    return [*isolation.setpriv, *isolation.bwrap, "--bind", workdir, "/tmp", "--remount-ro", "/",
            "--chdir", "/tmp", "--", isolation.python, "-I", "-S"]


def _probe(isolation: Isolation) -> str | None:
    """None if a child starts (as the expected user), else what went wrong, in one line."""
    with tempfile.TemporaryDirectory(prefix="reward-sandbox-") as tmp:
        if isolation.uid is not None:
            os.chown(tmp, isolation.uid, isolation.gid)
        try:
            done = subprocess.run(
                [*_command(isolation, tmp), "-c", _PROBE], env=_CLEAN_ENV, cwd=tmp,
                stdin=subprocess.DEVNULL, capture_output=True, timeout=30, **isolation.popen_user,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{isolation.python}: {exc}"
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"]
        return f"{isolation.python}: exit status {done.returncode}, {lines[-1]}"
    expected = os.getuid() if isolation.uid is None else isolation.uid
    if done.stdout.strip() != str(expected).encode():
        return f"{isolation.python}: ran as uid {done.stdout.strip().decode()}, not {expected}"
    return None


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
        home = "/tmp" if isolation.bwrap else tmp
        read_fd, write_fd = os.pipe()
        try:
            job = {"program": program, "steps": steps, "report_fd": write_fd,
                   "limits": asdict(limits),
                   # RLIMIT_NPROC counts per user and user namespace: only unsandboxed and
                   # without a dedicated user does it also count the trainer's processes.
                   "shared_uid": not isolation.bwrap and isolation.uid is None,
                   "audit_hook": not isolation.bwrap}
            Path(tmp, "job.json").write_text(json.dumps(job))
            if isolation.uid is not None:
                os.chown(tmp, isolation.uid, isolation.gid)  # its only writable place
            with open(Path(tmp, "output.txt"), "wb") as output:
                proc = subprocess.Popen(
                    [*_command(isolation, tmp), "-c", _CHILD_SOURCE],
                    cwd=tmp, env={**_CLEAN_ENV, "HOME": home, "TMPDIR": home},
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
    """Wait up to wall_s, then kill the child and all it started; True if it had to be killed.

    In bubblewrap the program is pid 1 of its own pid namespace and the only child of the
    bwrap process we started: killing it makes the kernel kill every process left in the
    namespace before bwrap sees it exit, so nothing outlives this function.
    """
    timed_out = not _exited_within(proc, wall_s)
    if timed_out:
        for pid in _children(proc.pid):
            _kill(os.kill, pid)
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
    # Unsandboxed, or should bwrap hang: the process group goes too (bwrap's pid 1 then
    # follows by --die-with-parent).
    _kill(os.killpg, proc.pid)
    proc.wait()
    return timed_out


def _exited_within(proc: subprocess.Popen, seconds: float) -> bool:
    """Whether proc exits within `seconds`, told the moment it does: Popen.wait(timeout)
    polls with growing sleeps, which added up to 30 ms to a 35 ms sandbox."""
    try:
        pidfd = os.pidfd_open(proc.pid)  # Linux >= 5.3: readable once the process exits
    except OSError:
        try:
            proc.wait(timeout=seconds)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        poller = select.poll()  # not select.select: a trainer may hold more than 1024 files
        poller.register(pidfd, select.POLLIN)
        return bool(poller.poll(seconds * 1000))
    finally:
        os.close(pidfd)


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def _kill(kill, pid: int) -> None:
    try:
        kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_available(fd: int, limit: int) -> bytes:
    # Non-blocking: unsandboxed, a grandchild that escaped the kill could keep the pipe open.
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
