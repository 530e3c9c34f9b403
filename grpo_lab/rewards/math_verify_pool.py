"""math-verify behind a process boundary: every (gold, answer) pair judged under a time limit.

math-verify bounds its own time with SIGALRM, which works only in a process's main thread
(rewards run in worker threads too), and no signal interrupts one huge computation:
`2^{2^{2^{2^{100}}}}` is a single big-integer power. So the pairs go to a few long-lived
child processes (grpo_lab/rewards/_math_verify_child.py, math-verify's own timeouts off). A child that
runs over the limit is killed and replaced, and its pair gets no verdict (`Outcome.verdict`
None, `Outcome.error` says why); a child that crashes costs only the pair it was judging.
One child starts when a reward is built (`start`, without waiting) or on first use (about a
second of CPU to import sympy, never counted against a pair's limit). A pair takes about 10 ms,
so more children start only while a call's pairs are still waiting GROW_AFTER_S after judging
began, up to `workers`. Children stay up between calls and are shared by every reward of the
process; calls from several threads take turns.

>>> pool = shared_pool(workers=1)
>>> [o.verdict for o in pool.judge([Job(gold="$\\\\frac{1}{2}$", answer="0.5"),
...                                 Job(gold="2", answer="$\\\\frac{1+\\\\sqrt{5}}{2}$")], timeout_s=30)]
[True, False]
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import select
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path

CHILD = str(Path(__file__).with_name("_math_verify_child.py"))
STARTUP_S = 120.0  # importing sympy and math-verify on a busy machine; never a pair's time
GROW_AFTER_S = 0.5  # a call's pairs still waiting this long: start more children (one judges ~50 by then)


@dataclass(frozen=True)
class Job:
    gold: str  # text for math-verify's parser, e.g. "$\\frac{1}{2}$" or "\\boxed{x=3}"
    answer: str
    float_rounding: int = 6  # decimals compared when a float is involved (math-verify's rule)


@dataclass(frozen=True)
class Outcome:
    verdict: bool | None  # None: no verdict (see error)
    gold: str | None = None  # math-verify's reading of the gold (sympy text), None if none
    answer: str | None = None  # ... and of the answer
    error: str | None = None  # why there is no verdict: over time, or the child failed
    timed_out: bool = False


class _Child:
    """One child process, the bytes it has written so far, and the job it is running."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-P", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True,  # Ctrl-C is for the trainer
        )
        self.fd = self.proc.stdout.fileno()
        self.pending = b""
        self.ready = False
        self.job: int | None = None  # index of the job it is judging
        self.deadline = time.monotonic() + STARTUP_S

    def send(self, index: int, job: Job, timeout_s: float) -> None:
        self.proc.stdin.write(json.dumps(asdict(job)).encode() + b"\n")
        self.proc.stdin.flush()
        self.job, self.deadline = index, time.monotonic() + timeout_s

    def replies(self) -> list[dict] | None:
        """The complete lines now readable (select said so); None once the child is gone."""
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            return None
        self.pending += chunk
        *lines, self.pending = self.pending.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):  # a broken pipe on close: it is gone anyway
                pipe.close()


class Pool:
    """Up to `workers` children judging jobs in parallel; see the module docstring."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._children: list[_Child] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def start(self) -> None:
        """Start a child now, without waiting for it: it imports while the caller works."""
        with self._lock:
            if os.getpid() != self._pid:
                self._children, self._pid = [], os.getpid()
            if not self._children:
                self._children.append(_Child())

    def judge(self, jobs: list[Job], timeout_s: float) -> list[Outcome]:
        """One Outcome per job, in order; each job gets at most `timeout_s` of wall time."""
        with self._lock:
            if os.getpid() != self._pid:  # forked: those children belong to the parent
                self._children, self._pid = [], os.getpid()
            outcomes: list[Outcome | None] = [None] * len(jobs)
            try:
                self._run(jobs, timeout_s, outcomes)
            finally:  # interrupted mid-call: a late reply must never reach the next call
                for child in [c for c in self._children if c.job is not None]:
                    self._drop(child)
            return outcomes

    def _run(self, jobs: list[Job], timeout_s: float, outcomes: list) -> None:
        todo = deque(range(len(jobs)))
        grow_at = math.inf  # GROW_AFTER_S after the first pair went out: a child's import is not judging
        while todo or any(child.job is not None for child in self._children):
            if todo and not self._children:
                self._children.append(_Child())
            while todo and time.monotonic() >= grow_at and len(self._children) < min(self.workers, len(jobs)):
                self._children.append(_Child())
            for child in self._children:
                if child.ready and child.job is None and todo:
                    index = todo.popleft()
                    try:
                        child.send(index, jobs[index], timeout_s)
                        grow_at = min(grow_at, time.monotonic() + GROW_AFTER_S)
                    except OSError:  # it died while idle: start another, retry the job
                        todo.appendleft(index)
                        self._drop(child)
            waiting = [c for c in self._children if not c.ready or c.job is not None]
            if not waiting:
                continue
            wake = min(c.deadline for c in waiting)
            if todo and len(self._children) < min(self.workers, len(jobs)):
                wake = min(wake, grow_at)  # to start more children then
            wait_s = max(0.0, wake - time.monotonic())
            readable, _, _ = select.select([c.fd for c in waiting], [], [], wait_s)
            for child in [c for c in waiting if c.fd in readable]:
                replies = child.replies()
                if replies is None:  # crashed (a segfault, the memory cap, the CPU backstop)
                    code = child.proc.wait()
                    self._fail(child, outcomes, todo, f"the math-verify process died (exit code {code})")
                    continue
                for reply in replies:
                    if reply.get("ready"):
                        child.ready = True
                    elif child.job is not None:
                        outcomes[child.job] = Outcome(
                            verdict=reply.get("verdict"), gold=reply.get("gold"),
                            answer=reply.get("answer"), error=reply.get("error"),
                        )
                        child.job = None
            now = time.monotonic()
            late = [c for c in waiting if c in self._children and (c.job is not None or not c.ready)]
            for child in [c for c in late if c.deadline <= now]:
                if child.ready:
                    self._fail(child, outcomes, todo, f"over the {timeout_s:g} s limit", timed_out=True)
                else:
                    self._fail(child, outcomes, todo, f"the math-verify process did not start within {STARTUP_S:g} s")

    def _fail(self, child: _Child, outcomes: list, todo: deque, why: str, timed_out: bool = False) -> None:
        """The child is gone: its job (if any) has no verdict; if it never started, neither
        will the others (math-verify cannot be imported), so the remaining jobs fail too."""
        if child.job is not None:
            outcomes[child.job] = Outcome(verdict=None, error=why, timed_out=timed_out)
            child.job = None
        if not child.ready:
            while todo:
                outcomes[todo.popleft()] = Outcome(verdict=None, error=why)
        self._drop(child)

    def _drop(self, child: _Child) -> None:
        child.kill()
        self._children.remove(child)

    def close(self) -> None:
        with self._lock:
            for child in list(self._children):
                self._drop(child)


_POOL: Pool | None = None
_POOL_LOCK = threading.Lock()


def shared_pool(workers: int) -> Pool:
    """The process's pool, grown to at least `workers` children (started when first needed)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = Pool(workers)
            atexit.register(_POOL.close)
        _POOL.workers = max(_POOL.workers, workers)
        return _POOL


def default_workers() -> int:
    """The most children a pool grows to: one per CPU core, at most 8 (a step's scoring has the CPU)."""
    return max(1, min(8, os.cpu_count() or 1))
