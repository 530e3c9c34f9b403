"""The built-in `python` tool: the model's code runs in the bubblewrap sandbox the code reward
uses (grpo_lab/rewards/sandbox.py), never in the trainer's process.

The sandbox's own wall-time limit kills the child (and everything it started), so a tool call
the runner stops waiting for (runner.py's timeout) leaves nothing running for long. Without a
working bwrap the call is refused (an error text) unless the user allowed unsandboxed code
(GRPO_LAB_ALLOW_UNSANDBOXED=1), as for the code reward.
"""

from __future__ import annotations

from grpo_lab.rewards.sandbox import Limits, resolve_isolation, run_python

WALL_S = 4.0  # under the runner's default 5 s, so the sandbox's own kill comes first
OUTPUT_TAIL = 2000  # bytes of output the sandbox hands back (sandbox._tail)


def python(code: str) -> str:
    """Run Python code (standard library only) in a sandbox and return what it prints.

    Args:
        code: the program, for example "print(12345 * 6789)".
    """
    result = run_python(code, [], Limits(wall_s=WALL_S, cpu_s=int(WALL_S)), resolve_isolation())
    if result.timed_out:
        raise TimeoutError(f"the code ran past {WALL_S:g} s")
    if not result.loaded:  # it raised: the last line of its traceback says what
        lines = [line for line in result.output.splitlines() if line.strip()]
        raise RuntimeError(lines[-1].removeprefix("solution failed: ") if lines
                           else f"exit status {result.returncode}")
    if len(result.output.encode()) >= OUTPUT_TAIL:  # the sandbox keeps only the tail: it wrote more
        raise ValueError(f"output too long (over {OUTPUT_TAIL} bytes; print less)")
    return result.output.strip()
