"""Small text helpers shared by the rewards."""

from __future__ import annotations


def as_text(completion) -> str:
    """The text of a completion: a plain string, or TRL's conversational form (a list of
    {"role", "content"} messages): the last assistant message, the model's final answer (a tool
    rollout's conversation ends with it; grpo_lab/rewards/README.md, "Tool rollouts").

    >>> as_text([{"role": "assistant", "content": "42"}])
    '42'
    >>> as_text([{"role": "assistant", "content": "", "tool_calls": []}, {"role": "tool", "content": "5"},
    ...          {"role": "assistant", "content": "so 5"}, {"role": "tool", "content": "cut"}])
    'so 5'
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, (list, tuple)) and completion and isinstance(completion[-1], dict):
        said = [m for m in completion if isinstance(m, dict) and m.get("role") == "assistant"] or completion[-1:]
        return str(said[-1].get("content", "") or "")
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    return "" if completion is None else str(completion)


def require_column(columns: dict, name: str, reward: str) -> list:
    """The dataset column `name`, or a KeyError that tells the user what to fix."""
    if name not in columns or columns[name] is None:
        have = ", ".join(sorted(columns)) or "(none)"
        raise KeyError(f"reward {reward!r} needs the dataset column {name!r}; columns given: {have}")
    return columns[name]
