"""The sandbox's child side: runs in a fresh `python -I -S` (stdlib only, Python >= 3.8).

The parent (grpo_lab/rewards/sandbox.py) passes this file's source with `-c`, in a temporary working
directory holding `job.json`, inside bubblewrap. Order matters: the limits go in *before* any
untrusted code runs, and cannot be lifted by it (rlimits only go down without privileges).
Only when the user opted into running without bubblewrap does an audit hook go in too: it
stops accidents (a write outside the working directory, a subprocess), not attacks.

Report protocol, one byte each, on the pipe `job["report_fd"]`: "S" the program loaded (or
"X" it raised), then "1"/"0" per test, then "." when done. A killed child leaves a short report.
"""

import json
import os
import resource
import signal
import sys
import types

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
# Unsandboxed only. Processes, raw memory access, network: a hook is no wall (PEP 578).
BLOCKED_EVENTS = {
    "os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
    "os.kill", "os.killpg", "signal.pthread_kill", "subprocess.Popen", "pty.spawn",
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.remote_exec",
}
BLOCKED_PREFIXES = ("socket.", "ctypes.", "_ctypes.", "mmap.")
BLOCKED_IMPORTS = {
    "ctypes", "_ctypes", "_posixsubprocess", "socket", "_socket", "ssl", "_ssl",
    "multiprocessing", "_multiprocessing", "mmap",
}
# Events whose path arguments must stay inside the working directory.
PATH_EVENTS = {
    "os.remove": 1, "os.rmdir": 1, "os.mkdir": 1, "os.chmod": 1, "os.chown": 1,
    "os.truncate": 1, "os.utime": 1, "os.chflags": 1, "os.setxattr": 1, "os.removexattr": 1,
    "os.rename": 2, "os.symlink": 2, "os.link": 2,
}


def set_limits(job):
    limits = job["limits"]
    cpu = int(limits["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU, then SIGKILL
    memory = int(limits["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    output = int(limits["file_bytes"])
    resource.setrlimit(resource.RLIMIT_FSIZE, (output, output))  # writes past it: EFBIG
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    nproc = int(limits["nproc"]) + (own_tasks() if job["shared_uid"] else 0)
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    # A backstop should the parent die before killing us (unsandboxed: in bubblewrap this
    # process is pid 1 and ignores SIGALRM, and --die-with-parent does the job).
    signal.alarm(int(limits["wall_s"]) + 2)


def own_tasks():
    """Threads and processes of this uid (RLIMIT_NPROC counts them all, the trainer's too)."""
    count, uid = 0, str(os.getuid())
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/status" % pid) as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            if fields["Uid"].split()[0] == uid:
                count += int(fields["Threads"])
        except (OSError, KeyError, ValueError):
            continue
    return count


def make_hook(root, blocked_events, blocked_prefixes, blocked_imports, path_events):
    # Everything the hook uses is bound here, not looked up in this module's globals at call
    # time, so code that reaches the bootstrap module cannot simply edit the lists.
    realpath, join, getcwd, fsdecode, fspath, sep = (
        os.path.realpath, os.path.join, os.getcwd, os.fsdecode, os.fspath, os.sep
    )

    def inside(path):
        if isinstance(path, int):
            return True  # an already-open file descriptor
        if isinstance(path, bytes):
            path = fsdecode(path)
        full = realpath(join(getcwd(), fspath(path)))
        return full == root or full.startswith(root + sep)

    def hook(event, args):
        if event in blocked_events or event.startswith(blocked_prefixes):
            raise PermissionError("sandbox: %s is not allowed" % event)
        if event == "import" and args[0].partition(".")[0] in blocked_imports:
            raise ImportError("sandbox: import of %s is not allowed" % args[0])
        if event == "open" and args[0] is not None:
            path, mode, flags = args
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & WRITE_FLAGS
            )
            if writing and not inside(path):
                raise PermissionError("sandbox: writing %r outside the working directory" % (path,))
        if event in path_events:
            for path in args[: path_events[event]]:
                if path is not None and not inside(path):
                    raise PermissionError("sandbox: %s on %r is not allowed" % (event, path))

    return hook


def log(line):
    try:  # stderr may be the file that just hit its size limit
        print(line, file=sys.stderr)
    except (OSError, ValueError):
        pass


def run(job, report):
    # A fresh __main__ for the solution (dataclasses, pickle need one); this bootstrap's own
    # module leaves sys.modules.
    main_module = types.ModuleType("__main__")
    sys.modules["__main__"] = main_module
    namespace = main_module.__dict__
    try:
        exec(compile(job["program"], "solution.py", "exec"), namespace)
        report(b"S")
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the tests still fail
        report(b"X")
        log("solution failed: %s: %s" % (type(exc).__name__, exc))
        return
    for number, step in enumerate(job["steps"]):
        try:
            exec(compile(step["code"], "test_%d.py" % number, "exec"), namespace)
            ok = True
        except BaseException as exc:
            ok = False
            log("step %d failed: %s: %s" % (number, type(exc).__name__, exc))
        if step["test"]:
            report(b"1" if ok else b"0")
        elif not ok:
            return  # broken setup: the remaining tests cannot be trusted to run
    report(b".")


def main():
    with open("job.json") as f:
        job = json.load(f)
    set_limits(job)
    fd = job["report_fd"]
    write = os.write

    def report(byte):
        try:
            write(fd, byte)
        except OSError:
            pass

    if job["audit_hook"]:
        sys.addaudithook(make_hook(
            os.path.realpath(os.getcwd()), frozenset(BLOCKED_EVENTS), BLOCKED_PREFIXES,
            frozenset(BLOCKED_IMPORTS), dict(PATH_EVENTS),
        ))
    run(job, report)


if __name__ == "__main__":
    main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)  # skip interpreter teardown: faster, and no atexit code from the solution
