"""The chapter's five quiz questions: which option is right. Their text lives in dashboard/locales/
under quiz.<id>.* (the question, o1..o4, and why)."""

from __future__ import annotations

# (question id, number of options, index of the right option)
QUESTIONS = (
    ("structure", 4, 1),  # the group replaces the value model
    ("advantage", 4, 2),  # (r_i - mean) / std within the group
    ("clip", 4, 0),  # keeps the ratio in [1-eps, 1+eps]: no gradient beyond
    ("kl_purpose", 4, 3),  # stay close to the reference model
    ("kl_fact", 4, 1),  # >= 0, zero only when equal, not symmetric
)

# The "GRPO and its variants" page's own questions (same text layout in dashboard/locales/).
VARIANT_QUESTIONS = (
    ("var_equal", 4, 1),  # dynamic sampling drops the group and samples more prompts
    ("var_length", 4, 0),  # 1/|o_i| dilutes a long answer's per-token push; Dr. GRPO does not
    ("var_gspo", 4, 2),  # GSPO clips one ratio per response, the geometric mean
)


def is_right(qid: str, choice: int | None) -> bool | None:
    """True / False for an answer, None while unanswered."""
    if choice is None:
        return None
    for q, _, right in QUESTIONS + VARIANT_QUESTIONS:
        if q == qid:
            return choice == right
    raise KeyError(qid)


def score(answers: dict[str, int | None]) -> tuple[int, int]:
    """(right, answered) over the answers given so far."""
    marks = [is_right(q, answers.get(q)) for q, _, _ in QUESTIONS]
    return sum(m is True for m in marks), sum(m is not None for m in marks)
