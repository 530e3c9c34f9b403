"""Throughput of the unit-test reward: completions per second, scored a group at a time.

    .venv/bin/python bench/bench_code_reward.py               # groups of 8, all CPU cores
    .venv/bin/python bench/bench_code_reward.py --workers 1   # one sandbox at a time

Each completion is an MBPP-sized function with 3 asserts, run in its own sandboxed process
(see grpo_lab/rewards/sandbox.py). Three mixes: all correct; half wrong or crashing (a realistic early
group); and a group with one infinite loop, which costs the full timeout.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from grpo_lab import rewards  # noqa: E402
from grpo_lab.rewards.sandbox import resolve_isolation  # noqa: E402

TESTS = [
    "assert is_prime(2)",
    "assert not is_prime(15)",
    "assert [n for n in range(20) if is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19]",
]
CORRECT = (
    "```python\ndef is_prime(n):\n    if n < 2:\n        return False\n"
    "    return all(n % d for d in range(2, int(n ** 0.5) + 1))\n```"
)
WRONG = "```python\ndef is_prime(n):\n    return n % 2 == 1\n```"
CRASH = "```python\ndef is_prime(n):\n    return n / 0\n```"
LOOP = "```python\ndef is_prime(n):\n    while True:\n        pass\n```"


def mixes(group_size: int) -> dict[str, list[str]]:
    mixed = [CORRECT, WRONG, CRASH, CORRECT] * group_size
    return {
        "all correct": [CORRECT] * group_size,
        "half wrong or crashing": mixed[:group_size],
        "one infinite loop": [LOOP] + [CORRECT] * (group_size - 1),
    }


def bench(reward, completions: list[str], groups: int) -> tuple[float, float]:
    """(completions per second, median seconds per group)."""
    times = []
    for _ in range(groups):
        start = time.perf_counter()
        reward(["Write is_prime."] * len(completions), completions, tests=[TESTS] * len(completions))
        times.append(time.perf_counter() - start)
    return len(completions) * groups / sum(times), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--groups", type=int, default=20, help="groups timed per mix")
    parser.add_argument("--workers", type=int, default=None, help="parallel sandboxes (default: cores)")
    parser.add_argument("--timeout", type=float, default=2.0, help="wall seconds per completion")
    args = parser.parse_args()

    reward = rewards.build("code_tests", timeout_s=args.timeout, workers=args.workers)
    isolation = resolve_isolation()
    print(f"cores={os.cpu_count()} workers={args.workers or os.cpu_count()} group={args.group_size}"
          f" timeout={args.timeout}s python={isolation.python}")
    print(f"isolation: {isolation.description}")
    reward(["warm up"], [CORRECT], tests=[TESTS])
    for name, completions in mixes(args.group_size).items():
        groups = 2 if "loop" in name else args.groups
        per_s, median = bench(reward, completions, groups)
        print(f"{name:>24}: {per_s:7.1f} completions/s   {median * 1e3:7.1f} ms per group")


if __name__ == "__main__":
    main()
