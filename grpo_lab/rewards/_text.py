"""Small text helpers shared by the rewards."""

from __future__ import annotations


def as_text(completion) -> str:
    """The text of a completion: a plain string, or TRL's conversational form (a list of
    {"role", "content"} messages, where the last message is the model's reply).

    >>> as_text([{"role": "assistant", "content": "42"}])
    '42'
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, (list, tuple)) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    return "" if completion is None else str(completion)


def require_column(columns: dict, name: str, reward: str) -> list:
    """The dataset column `name`, or a KeyError that tells the user what to fix."""
    if name not in columns or columns[name] is None:
        have = ", ".join(sorted(columns)) or "(none)"
        raise KeyError(f"reward {reward!r} needs the dataset column {name!r}; columns given: {have}")
    return columns[name]
