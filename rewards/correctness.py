"""Correctness verifier: 1.0 when the completion's final answer equals the reference, else 0.0.

The reference comes from a dataset column (default `answer`). Numbers compare exactly (or
within a relative tolerance for rounded decimals), other answers symbolically with sympy,
letter references ("B") as multiple choice. No parsable answer scores 0.0: the model had its
chance, and a wrong format is as wrong as a wrong number. A missing reference (None) scores
None. See rewards/verifier.py for where the answer is looked for.

>>> correct = correctness_reward()
>>> prompts = ["12+7=", "3-10=", "1000+234="]
>>> correct(prompts, ["19", "The answer is -7.", "1,234"], answer=["19", "-7", "1234"])
[1.0, 1.0, 1.0]
>>> correct(["q", "q"], ["no idea", "\\\\boxed{3/4}"], answer=["4", "0.75"])
[0.0, 1.0]
"""

from __future__ import annotations

from rewards._text import as_text, require_column
from rewards.verifier import answers_match


def correctness_reward(
    column: str = "answer",
    symbolic: bool = True,
    rel_tol: float = 1e-6,
    multiple_choice: bool | None = None,
):
    """column: the dataset column with the reference; symbolic: try sympy for references
    that are not numbers; rel_tol: tolerance for decimals; multiple_choice: None detects a
    letter reference, True/False force it."""

    def correctness(prompts, completions, **columns) -> list[float | None]:
        references = require_column(columns, column, "correctness")
        return [
            None
            if reference is None
            else float(
                answers_match(as_text(completion), reference, symbolic, rel_tol, multiple_choice)
            )
            for completion, reference in zip(completions, references)
        ]

    return correctness
