"""Prompt sources. A task yields rows: a `prompt` plus columns the rewards read (e.g. `answer`).

The built-in task is small-number addition, scored by the correctness reward.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Task:
    name: str
    rows: list[dict[str, Any]]  # each: prompt_id, prompt, and reward columns

    def batch(self, step: int, n: int, seed: int) -> list[dict[str, Any]]:
        """The prompts of one step: a function of (seed, step) only, so a resumed run sees the same."""
        rng = random.Random(seed * 1_000_003 + step)
        return [self.rows[rng.randrange(len(self.rows))] for _ in range(n)]

    def sft_pairs(self, seed: int, n: int, answers_correct: bool) -> list[tuple[str, str]]:
        """(prompt, completion) pairs for the warm start.

        With answers_correct False the completions are random answers: the model learns the
        format (a number, then stop) but not the arithmetic; RL must teach that.
        """
        rng = random.Random(seed)
        answers = sorted({row["answer"] for row in self.rows}, key=int)
        pairs = []
        for _ in range(n):
            row = self.rows[rng.randrange(len(self.rows))]
            pairs.append((row["prompt"], row["answer"] if answers_correct else rng.choice(answers)))
        return pairs


def arithmetic(max_operand: int = 9) -> Task:
    rows = [
        {"prompt_id": f"{a}+{b}", "prompt": f"{a}+{b}=", "answer": str(a + b)}
        for a in range(max_operand + 1)
        for b in range(max_operand + 1)
    ]
    return Task("arithmetic", rows)
