"""What a tracker's reader gives back: its steps' scalars, their times, the config and the completions tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Logged:
    """One run as a tracker holds it. scalars: {step: {name: value}}; times: {step: unix time};
    tables: {step: rows} (each row a dict of TABLE_COLUMNS and rewards/<fn>); config: None when not logged."""

    scalars: dict[int, dict[str, float]] = field(default_factory=dict)
    times: dict[int, float] = field(default_factory=dict)
    tables: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    config: dict[str, Any] | None = None

    def add(self, step: int, name: str, value: float) -> None:
        self.scalars.setdefault(step, {})[name] = value
