"""`async def` rewards, awaited as TRL 1.16 awaits them: on one event loop that lives in a daemon
thread for the whole process (`GRPOTrainer.async_loop`), several at once when a step has several.

One loop, not `asyncio.run` per call: a reward may keep a client (an HTTP session, a semaphore)
bound to the loop it first ran on, and a fresh loop per call would break it on the second call.
The loop's own thread never waits here, so any thread can score: the trainer's, or a worker's.

>>> import asyncio
>>> async def slow(x):
...     await asyncio.sleep(0.01)
...     return x * 2
>>> resolve(slow(21)), resolve(5)
(42, 5)
>>> [f.result() for f in [submit(slow(1)), submit(slow(2))]]  # both run at once
[2, 4]
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from concurrent.futures import Future

_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_lock = threading.Lock()


def _running_loop() -> asyncio.AbstractEventLoop:
    """The process's reward loop, started on first use."""
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed() or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            _thread = threading.Thread(target=run, name="grpo-lab-async-rewards", daemon=True)
            _thread.start()
            ready.wait()
            _loop = loop
        return _loop


async def _await(awaitable):
    return await awaitable


def submit(awaitable) -> Future:
    """Start `awaitable` on the reward loop; its concurrent.futures.Future."""
    loop = _running_loop()
    if threading.current_thread() is _thread:  # waiting here would wait on ourselves forever
        raise RuntimeError("an async reward cannot be awaited from inside another async reward's loop")
    return asyncio.run_coroutine_threadsafe(_await(awaitable), loop)


def resolve(value):
    """`value` itself, or what it gives when awaited (a coroutine an `async def` reward returned)."""
    return submit(value).result() if inspect.isawaitable(value) else value
