"""Trainers for the tests, forked from a process that has imported torch, transformers and the trainer once.

A fresh `python -m grpo_lab.trainer` spends about 4.5 s of CPU importing before it reads an option, and
the suite starts about a hundred trainers on two cores. So each pytest worker keeps one server (this file
run as a script) that imports them once; a test's trainer is a fork of it that runs the same
`grpo_lab.trainer.__main__.main(argv)` as the command, in its own process, with its own environment,
folder, output files and exit status (the server reaps it and writes the status down).

What a fork cannot give goes the long way, a fresh `python -m grpo_lab.trainer`: variables that torch,
transformers or the Hub client read as they are imported (`INHERITED`). The command itself is tested
where it is started: the console script (test_package), torchrun, the dashboard's launcher, the sweep.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# prefixes of the variables that the libraries read once, when imported: a fork keeps the server's
INHERITED = ("HF_", "HUGGINGFACE", "TRANSFORMERS", "TORCH", "PYTORCH", "OMP_", "MKL_", "CUDA", "TOKENIZERS")


COMMAND = [sys.executable, "-m", "grpo_lab.trainer"]  # what a fork stands in for


def _read_at_import(env) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(INHERITED)}


def forkable(env: dict[str, str]) -> bool:
    """Whether a trainer with environment `env` would import the libraries as the server did."""
    return _read_at_import(env) == _read_at_import(_Server.env or os.environ)


class ForkedTrainer:
    """A trainer forked by the server, with the part of subprocess.Popen the tests use."""

    def __init__(self, args: list[str], pid: int, files: Path) -> None:
        self.args, self.pid, self._files = args, pid, files
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and (self._files / "rc").exists():
            self.returncode = int((self._files / "rc").read_text())
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.05)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        return tuple((self._files / name).read_text(errors="replace") for name in ("stdout", "stderr"))

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # not reaped yet, so the pid is still this trainer's
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Server:
    """This pytest worker's server, started on first use."""
    proc: subprocess.Popen | None = None
    env: dict[str, str] = {}
    lock = threading.Lock()
    folder: Path | None = None  # each trainer's stdout, stderr and exit status, one folder a trainer


def fork_trainer(options: list[str], env: dict[str, str]) -> ForkedTrainer:
    """`python -m grpo_lab.trainer *options` in `env`, run from the project's root, as a fork of the server."""
    with _Server.lock:
        if _Server.proc is None or _Server.proc.poll() is not None:
            if _Server.folder is None:
                _Server.folder = Path(tempfile.mkdtemp(prefix="forked-trainers-"))
                atexit.register(shutil.rmtree, _Server.folder, ignore_errors=True)
            _Server.env = {**os.environ, "PYTHONPATH": str(ROOT)}
            _Server.proc = subprocess.Popen([sys.executable, __file__], cwd=ROOT, env=_Server.env, text=True,
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            assert _Server.proc.stdout.readline().strip() == "ready", "the trainer fork server did not start"
        files = Path(tempfile.mkdtemp(dir=_Server.folder))
        _Server.proc.stdin.write(json.dumps({"argv": options, "env": env, "cwd": str(ROOT), "files": str(files)}) + "\n")
        _Server.proc.stdin.flush()
        pid = int(_Server.proc.stdout.readline())
    return ForkedTrainer([*COMMAND, *options], pid, files)


# --- the server ---------------------------------------------------------------------------------

def _child(job: dict, main) -> None:
    """In the fork: become the trainer `job` asks for, run it, exit with its status."""
    code = 1
    try:
        os.chdir(job["cwd"])
        os.environ.clear()
        os.environ.update(job["env"])
        sys.path[:0] = [p for p in job["env"].get("PYTHONPATH", "").split(os.pathsep) if p]  # user modules
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd, name in ((1, "stdout"), (2, "stderr")):
            out = os.open(os.path.join(job["files"], name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)
            os.close(out)
        sys.argv = [sys.argv[0], *job["argv"]]
        code = main(job["argv"])
    except SystemExit as exc:  # argparse's --help and usage errors
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()  # what the interpreter's exit would run: the math-verify pool's close
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _reap(children: dict[int, str]) -> None:
    """Write down the exit status of every trainer that has ended (Popen's convention: -N for signal N)."""
    while children:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        files = children.pop(pid, None)
        if files is not None:
            tmp = os.path.join(files, "rc.tmp")
            with open(tmp, "w") as out:
                out.write(str(os.waitstatus_to_exitcode(status)))
            os.replace(tmp, os.path.join(files, "rc"))  # whole or absent: the test polls for it


def serve() -> None:
    import gc

    sys.path[0] = str(ROOT)  # as under `python -m` from the root: the folder run from, not tests/
    gc.disable()
    import grpo_lab.trainer.run  # noqa: F401  (what every trainer imports before it starts)
    from grpo_lab.trainer.__main__ import main

    gc.freeze()  # the forks share these pages and no collection of theirs walks them
    gc.enable()
    print("ready", flush=True)
    children: dict[int, str] = {}
    while True:
        asked, _, _ = select.select([sys.stdin], [], [], 0.1)
        _reap(children)
        if not asked:
            continue
        line = sys.stdin.readline()  # one request at a time: the client waits for each pid
        if not line:
            return  # the worker is gone; trainers still going finish on their own
        job = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _child(job, main)
        children[pid] = job["files"]
        print(pid, flush=True)


if __name__ == "__main__":
    serve()
