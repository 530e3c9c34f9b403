"""Completions as rows of tables/samples, with `group` (the group's index within its step) written
once as a column: `(step, group)` identifies a group exactly (docs/run-directory.md, schema 2)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from grpo_lab.objective.options import group_of
from grpo_lab.rundir.importers import turns

ID_MAX_CHARS = 40


def text(value: Any) -> str:
    """A prompt or completion as plain text: a string as it is; TRL's conversational form (a list
    of {"role", "content"} messages) as one `role: content` line per message.

    >>> text([{"role": "user", "content": "2+2="}, {"role": "assistant", "content": "4"}])
    'user: 2+2=\\nassistant: 4'

    A tool call (TRL's `tool_calls`) is written after its message's text:

    >>> text([{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
    ...     "name": "calculator", "arguments": {"expression": "2+2"}}}]}, {"role": "tool", "content": "4"}])
    'assistant: [calculator(expression="2+2")]\\ntool: 4'
    """
    if isinstance(value, str):
        return value
    if hasattr(value, "tolist"):  # a numpy array of messages, as pandas reads them from Parquet
        value = value.tolist()
    if isinstance(value, dict):
        value = [value]
    if isinstance(value, (list, tuple)) and all(isinstance(m, dict) for m in value):
        return "\n".join(f"{m.get('role', '?')}: " + " ".join(filter(None, [_content(m.get("content")),
                                                                            _calls(m.get("tool_calls"))]))
                         for m in value)
    return "" if value is None else str(value)


def _calls(calls: Any) -> str:
    """A message's tool calls as `[name(key="value", ...)]` ("" without calls)."""
    shown = []
    for call in turns.plain(calls) or []:
        if isinstance(call, dict):
            fn = call.get("function") if isinstance(call.get("function"), dict) else call
            args = fn.get("arguments")
            args = ", ".join(f"{k}={json.dumps(v, default=str, ensure_ascii=False)}" for k, v in args.items()
                             if v is not None) if isinstance(args, dict) else str(args or "")
            shown.append(f"{fn.get('name') or '?'}({args})")
    return " ".join(f"[{c}]" for c in shown)


def _content(content: Any) -> str:
    if isinstance(content, (list, tuple)):  # multimodal parts: keep the text ones
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else str(content)


def prompt_id(prompt: str) -> str:
    """A stable id for a prompt: its text when short and on one line, else `p-` and 10 hex digits
    of its SHA-1 (the same text always gets the same id, in every run).

    >>> prompt_id("3+4="), prompt_id("Solve:\\n3+4")
    ('3+4=', 'p-45d3b0bfc3')
    """
    if prompt and len(prompt) <= ID_MAX_CHARS and "\n" not in prompt and prompt.strip() == prompt:
        return prompt
    return "p-" + hashlib.sha1(prompt.encode()).hexdigest()[:10]


def blocks(n: int, group_size: int, first_group: int = 0) -> tuple[list[int], list[int]]:
    """`group` and `sample_idx` of n rows that come in consecutive blocks of group_size (TRL's order).

    >>> blocks(6, 3, first_group=2)
    ([2, 2, 2, 3, 3, 3], [0, 1, 2, 0, 1, 2])
    """
    return [first_group + group_of(i, group_size) for i in range(n)], [i % group_size for i in range(n)]


def weighted_total(per_fn: dict[str, Sequence[float | None]], weights: dict[str, float]) -> list[float | None]:
    """Each row's weighted sum over the functions that scored it; None where none did (TRL's rule).

    >>> weighted_total({"a": [1.0, None], "b": [0.5, None]}, {"a": 1.0, "b": 2.0})
    [2.0, None]
    """
    n = len(next(iter(per_fn.values()), []))
    out: list[float | None] = []
    for i in range(n):
        scored = [(weights.get(fn, 1.0), v[i]) for fn, v in per_fn.items() if _number(v[i]) is not None]
        out.append(sum(w * float(r) for w, r in scored) if scored else None)
    return out


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def columns(*, step: int, group: Sequence[int], sample_idx: Sequence[int], prompt: Sequence[str],
            completion: Sequence[str], reward: Sequence[float | None], advantage: Sequence[float],
            per_fn: dict[str, Sequence[float | None]] | None = None,
            extra: dict[str, Sequence[Any] | pa.Array] | None = None,
            answer: Sequence[str | None] | None = None) -> dict[str, pa.Array]:
    """Typed columns of tables/samples for one step's rows (NaN rewards become null). extra: the
    `extra/<name>` columns (see extra_columns); answer: the reference answer, when the source has one."""
    floats = lambda values: pa.array([_number(v) for v in values], pa.float64())  # noqa: E731
    out = {
        "step": pa.array([step] * len(prompt), pa.int64()),
        "group": pa.array(group, pa.int64()),
        "prompt_id": pa.array([prompt_id(p) for p in prompt], pa.string()),
        "sample_idx": pa.array(sample_idx, pa.int64()),
        "prompt": pa.array(prompt, pa.string()),
        "completion": pa.array(completion, pa.string()),
        "reward": floats(reward),
        "advantage": pa.array([float(a) for a in advantage], pa.float64()),
    }
    out.update({f"rewards/{fn}": floats(v) for fn, v in (per_fn or {}).items()})
    out.update({name: v if isinstance(v, pa.Array) else floats(v) for name, v in (extra or {}).items()})
    if answer is not None:
        out["answer"] = pa.array(answer, pa.string())
    return out


EXTRA_PREFIX = "extra/"  # the native trainer's name for what a reward logged (docs/run-directory.md)


def extra_columns(values: dict[str, Sequence[Any]], kinds: dict[str, str]) -> dict[str, pa.Array]:
    """A source's per-completion extras as `extra/<name>` columns: numbers (true/false as 1/0) while
    every value of the column is one, else text (objects as JSON). A column's kind is fixed where
    it first appears (`kinds`, kept across steps), so every part file of the run agrees on it.

    >>> cols = extra_columns({"acc": [True, None], "pred": ["4", 5]}, {})
    >>> cols["extra/acc"].to_pylist(), cols["extra/pred"].to_pylist()
    ([1.0, None], ['4', '5'])
    """
    out = {}
    for name, column in values.items():
        column = [v.tolist() if hasattr(v, "tolist") else v for v in column]  # numpy values, as pandas gives them
        numeric = all(v is None or isinstance(v, (int, float)) for v in column)  # bool is an int: 1/0
        kind = kinds.setdefault(name, "number" if numeric else "text")
        if kind == "number":
            out[EXTRA_PREFIX + name] = pa.array([_extra_number(v) for v in column], pa.float64())
        else:
            out[EXTRA_PREFIX + name] = pa.array([_extra_text(v) for v in column], pa.string())
    return out


def _nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _extra_number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not _nan(v) else None


def _extra_text(v: Any) -> str | None:
    if v is None or _nan(v):
        return None
    if isinstance(v, str):
        return v
    if isinstance(v, (list, dict, tuple)):
        return json.dumps(v, default=str, ensure_ascii=False)
    return f"{v:g}" if isinstance(v, float) else str(v)


# --- what the source trainer handed its rewards -------------------------------------------------

COLUMN_PREFIX = "column/"  # a dataset column as the rewards got it (docs/run-directory.md)
SOURCE_PROMPT, SOURCE_COMPLETION, SOURCE_COMPLETION_IDS = "source_prompt", "source_completion", "source_completion_ids"


def reward_call_columns(prompts: Sequence[Any], completions: Sequence[Any],
                        columns: dict[str, Sequence[Any]] | None = None,
                        completion_ids: Sequence[Any] | None = None) -> dict[str, pa.Array]:
    """The reward call of a source trainer (TRL's `_calculate_rewards`), one JSON text per completion, so
    a rescore calls the rewards with exactly it: `source_prompt` and `source_completion` as the rewards
    got them (a string, or TRL's list of messages), `source_completion_ids`, and each dataset column
    as `column/<name>`. A column with a value that is not JSON (an image) is left out, and so is one
    of the others (the rescore then reads the text columns).

    >>> cols = reward_call_columns([[{"role": "user", "content": "2+2="}]], [[{"role": "assistant", "content": "4"}]],
    ...                            {"solution": ["4"], "image": [object()]}, [[19, 2]])
    >>> sorted(cols)
    ['column/solution', 'source_completion', 'source_completion_ids', 'source_prompt']
    >>> cols["source_completion"].to_pylist(), cols["column/solution"].to_pylist()
    (['[{"role": "assistant", "content": "4"}]'], ['"4"'])
    """
    named = {SOURCE_PROMPT: prompts, SOURCE_COMPLETION: completions, SOURCE_COMPLETION_IDS: completion_ids,
             **{COLUMN_PREFIX + str(k): v for k, v in (columns or {}).items()}}
    out = {}
    for name, values in named.items():
        if values is None:
            continue
        try:
            out[name] = pa.array([json.dumps(turns.plain(v), ensure_ascii=False) for v in values], pa.string())
        except (TypeError, ValueError):  # not JSON: a column the rescore cannot hand over, left out
            continue
    return out
