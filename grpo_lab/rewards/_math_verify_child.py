"""math-verify's child side: one long-lived process that judges (gold, answer) pairs.

The parent (grpo_lab/rewards/math_verify_pool.py) starts it as `python -P this_file`, sends one JSON job
per line on stdin and reads one JSON reply per line on stdout:

    {"gold": "$\\frac{1}{2}$", "answer": "0.5", "float_rounding": 6}
    {"verdict": true, "gold": "1/2", "answer": "0.500000000000000"}      (or {"error": "..."})

The first line it writes is {"ready": true}, once the imports and a first judgement are done, so start-up time never
counts against a job's time limit. math-verify's own timeouts are off (they use SIGALRM, which
only works in a main thread, and a signal cannot interrupt one long big-integer power anyway):
the parent kills this process when a job runs over time. Should the parent die first, the
pipe's end stops the loop, and a job still running meets the CPU backstop (each job may use
CPU_BACKSTOP_S more seconds of CPU) and the address-space cap: nothing runs away for long.
"""

import json
import logging
import os
import resource
import sys

MEMORY_BYTES = 4 << 30
CPU_BACKSTOP_S = 60
READING_CHARS = 200  # math-verify's reading of an answer, as shown by `explain`


def limit(kind: int, soft: int) -> None:
    """Set a soft rlimit (never above the hard one); best effort."""
    try:
        hard = resource.getrlimit(kind)[1]
        resource.setrlimit(kind, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
    except (ValueError, OSError):
        pass


def reading(parsed: list) -> str | None:
    """math-verify's parse result as short text: the first (sympy) reading, else None."""
    return str(parsed[0])[:READING_CHARS] if parsed else None


def main() -> None:
    limit(resource.RLIMIT_AS, MEMORY_BYTES)
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout = sys.stderr  # a stray print from a library must not corrupt the protocol
    logging.disable(logging.CRITICAL)  # "Timeout is disabled ..." on every process start

    from math_verify import parse, verify

    try:  # the first judgement builds parsers and caches (0.08 s here): start-up, not a job's time
        verify(parse("$\\frac{1}{2}$", parsing_timeout=None), parse("0.5", parsing_timeout=None), timeout_seconds=None)
    except Exception:  # noqa: BLE001 - a failing warm-up only loses the head start
        pass
    protocol.write('{"ready": true}\n')
    protocol.flush()
    for line in sys.stdin:
        used = resource.getrusage(resource.RUSAGE_SELF)
        limit(resource.RLIMIT_CPU, int(used.ru_utime + used.ru_stime) + CPU_BACKSTOP_S)
        try:
            job = json.loads(line)
            gold = parse(job["gold"], parsing_timeout=None)
            answer = parse(job["answer"], parsing_timeout=None)
            verdict = verify(gold, answer, float_rounding=job["float_rounding"], timeout_seconds=None)
            reply = {"verdict": bool(verdict), "gold": reading(gold), "answer": reading(answer)}
        except BaseException as exc:  # MemoryError, RecursionError, ...: a verdict-less reply
            reply = {"error": f"{type(exc).__name__}: {str(exc)[:READING_CHARS]}"}
        protocol.write(json.dumps(reply) + "\n")
        protocol.flush()


if __name__ == "__main__":
    main()
