"""Unit tests for code: the fraction of a task's tests that the completion's code passes.

Each completion runs in its own sandboxed process (grpo_lab/rewards/sandbox.py), in parallel across
the group. The code is the last fenced block (```python ... ```), else the whole completion.
The tests come from a dataset column (default `tests`), per sample either
- a list of strings: each one is a test (passes when it runs without raising), or
- one string: its top-level `assert` statements are the tests, the other statements are
  setup run in order (imports, helpers); a string without any assert is a single test
  (e.g. HumanEval's `check(candidate)`).
No tests (None, empty) score None. Code that loops, crashes, floods output or touches what it
may not fails its remaining tests; it never hangs the trainer. Without a working bubblewrap
the reward does not build (one line saying why) unless `allow_unsandboxed=True`.

>>> reward = code_tests_reward(timeout_s=2)
>>> reward(["Write add."], ["```python\\ndef add(a, b):\\n    return a + b\\n```"],
...        tests=[["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 5"]])
[0.6666666666666666]
"""

from __future__ import annotations

import ast
import math
import os
import re
import warnings
from concurrent.futures import ThreadPoolExecutor

from grpo_lab.rewards._text import as_text, require_column
from grpo_lab.rewards.registry import READS_COLUMN
from grpo_lab.rewards.sandbox import Limits, resolve_isolation, run_python

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


def code_tests_reward(
    column: str = READS_COLUMN["code_tests"],
    timeout_s: float = 5.0,
    memory_mb: int = 512,
    max_output_kb: int = 1024,
    workers: int | None = None,
    python: str | None = None,
    user: str | int | None = "nobody",
    allow_unsandboxed: bool = False,
):
    """timeout_s: wall time per completion; memory_mb: address-space cap; max_output_kb: cap on
    stdout+stderr and on any file written; workers: parallel sandboxes (default: CPU count);
    python/user/allow_unsandboxed: see grpo_lab/rewards/sandbox.py `resolve_isolation` (as root the
    sandbox runs as `user`; allow_unsandboxed=True, or GRPO_LAB_ALLOW_UNSANDBOXED=1, runs the
    code without bubblewrap where it is missing: only for code you trust)."""
    if timeout_s <= 0:
        raise ValueError(f"code_tests: timeout_s must be positive, got {timeout_s}")
    limits = Limits(
        wall_s=float(timeout_s), cpu_s=max(1, math.ceil(timeout_s)), memory_mb=int(memory_mb),
        file_bytes=int(max_output_kb) * 1024,
    )
    isolation = resolve_isolation(python, user, allow_unsandboxed)  # fail at build, not on step 1
    if not isolation.bwrap:
        warnings.warn(f"code_tests: completions run without a sandbox ({isolation.description})")
    workers = workers or os.cpu_count() or 1

    def run_one(job):
        code, steps = job
        if steps is None:
            return None
        result = run_python(code, steps, limits, isolation)
        return result.passed / result.total

    def code_tests(prompts, completions, **columns) -> list[float | None]:
        tests = require_column(columns, column, "code_tests")
        jobs = [(extract_code(as_text(c)), parse_tests(t)) for c, t in zip(completions, tests)]
        if len(jobs) <= 1:
            return [run_one(job) for job in jobs]
        with ThreadPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
            return list(pool.map(run_one, jobs))

    return code_tests


def extract_code(text: str) -> str:
    """The last fenced code block (an unclosed fence runs to the end), else the whole text.

    >>> extract_code("Here:\\n```python\\nx = 1\\n```\\nDone.")
    'x = 1\\n'
    """
    blocks = _FENCE.findall(text)
    return blocks[-1] if blocks else text


def parse_tests(tests) -> list[dict] | None:
    """Sandbox steps ({"code", "test"}) for one sample's tests; None when there are none.

    >>> [(s["code"], s["test"]) for s in parse_tests("import math\\nassert math.pi > 3")]
    [('import math', False), ('assert math.pi > 3', True)]
    """
    if tests is None:
        return None
    if isinstance(tests, str):
        steps = _split_statements(tests)
    else:
        steps = [{"code": str(t), "test": True} for t in tests]
    return steps if any(s["test"] for s in steps) else None


def _split_statements(source: str) -> list[dict]:
    if not source.strip():
        return []
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        reason = f"{exc.msg}, line {exc.lineno}"
        raise ValueError(f"code_tests: the tests do not parse as Python ({reason})") from exc
    steps = [
        {"code": _segment(source, node), "test": isinstance(node, ast.Assert)} for node in tree.body
    ]
    if not any(s["test"] for s in steps):
        return [{"code": source, "test": True}]
    return steps


def _segment(source: str, node: ast.stmt) -> str:
    # get_source_segment would drop a function's decorators: start at the first one instead.
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    if first == node.lineno:
        return ast.get_source_segment(source, node)
    return "\n".join(source.splitlines()[first - 1 : node.end_lineno])
