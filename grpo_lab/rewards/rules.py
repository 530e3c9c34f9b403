"""Rule-based rewards: format, length, keywords, repetition. Each is a factory returning a
TRL-style reward `f(prompts, completions, **columns) -> list[float]`.

Rules are cheap and transparent, and easy to game: a length reward alone teaches padding, a
keyword reward teaches keyword stuffing. Combine them with a verifier (see score_all).
"""

from __future__ import annotations

import re

from grpo_lab.rewards._text import as_text

UNITS = ("chars", "words")


def format_reward(pattern: str | None = None, tags=("think", "answer"), full_match: bool = True):
    """1.0 when the completion has the expected shape, else 0.0.

    pattern: a regex (DOTALL); when None, it is built from `tags`: each `<tag>...</tag>` in
    order, separated by whitespace. full_match: the whole completion must match (True) or the
    pattern may occur anywhere (False).

    >>> fmt = format_reward()
    >>> fmt(["q", "q"], ["<think>7+5 is 12</think> <answer>12</answer>", "<answer>12</answer>"])
    [1.0, 0.0]
    >>> format_reward(pattern=r"Answer: -?\\d+", full_match=False)(["q"], ["... Answer: 12"])
    [1.0]
    """
    if pattern is None:
        if not tags:
            raise ValueError("format: give a pattern or at least one tag")
        pattern = r"\s*".join(rf"<{re.escape(t)}>.*?</{re.escape(t)}>" for t in tags)
        pattern = rf"\s*{pattern}\s*"
    try:
        compiled = re.compile(pattern, re.DOTALL)
    except re.error as exc:
        raise ValueError(f"format: invalid regex {pattern!r}: {exc}") from exc
    match = compiled.fullmatch if full_match else compiled.search

    def format_(prompts, completions, **columns) -> list[float]:
        return [1.0 if match(as_text(c)) else 0.0 for c in completions]

    return format_


def length_reward(
    min_len: int = 0,
    max_len: int | None = None,
    unit: str = "chars",
    penalty_per_unit: float = 0.01,
    max_penalty: float = 1.0,
):
    """0.0 inside [min_len, max_len]; outside, -penalty_per_unit per unit of distance to the
    range, down to -max_penalty. unit: "chars" or "words". max_len None: no upper bound.

    >>> length = length_reward(min_len=2, max_len=4, unit="words", penalty_per_unit=0.25)
    >>> length(["q"] * 3, ["one", "one two three", "a b c d e f g h i j"])
    [-0.25, 0.0, -1.0]
    """
    if unit not in UNITS:
        raise ValueError(f"length: unit must be one of {UNITS}, got {unit!r}")
    if max_len is not None and max_len < min_len:
        raise ValueError(f"length: max_len ({max_len}) is below min_len ({min_len})")

    def length(prompts, completions, **columns) -> list[float]:
        out = []
        for completion in completions:
            text = as_text(completion)
            size = len(text.split()) if unit == "words" else len(text)
            distance = max(0, min_len - size)
            if max_len is not None:
                distance = max(distance, size - max_len)
            out.append(-min(max_penalty, penalty_per_unit * distance) if distance else 0.0)
        return out

    return length


def keywords_reward(
    required=(), banned=(), case_sensitive: bool = False, banned_penalty: float = 1.0
):
    """Fraction of `required` keywords present (1.0 when none are required), minus
    `banned_penalty` for each `banned` keyword present. Keywords match as whole words.

    >>> kw = keywords_reward(required=["because", "therefore"], banned=["As an AI"])
    >>> kw(["q"] * 3, ["12, because 7+5", "Because x, therefore y", "As an AI, because"])
    [0.5, 1.0, -0.5]
    """
    if isinstance(required, str) or isinstance(banned, str):
        raise ValueError("keywords: required and banned are lists of keywords, not a string")
    flags = 0 if case_sensitive else re.IGNORECASE
    # \b only applies next to word characters, so keywords like "C++" or "?!" still match.
    def compile_word(word):
        left = r"\b" if re.match(r"\w", word) else ""
        right = r"\b" if re.search(r"\w$", word) else ""
        return re.compile(left + re.escape(word) + right, flags)

    required_res = [compile_word(w) for w in required]
    banned_res = [compile_word(w) for w in banned]

    def keywords(prompts, completions, **columns) -> list[float]:
        out = []
        for completion in completions:
            text = as_text(completion)
            found = sum(1 for r in required_res if r.search(text))
            score = found / len(required_res) if required_res else 1.0
            score -= banned_penalty * sum(1 for r in banned_res if r.search(text))
            out.append(score)
        return out

    return keywords


def repetition_reward(n: int = 3, unit: str = "words", weight: float = 1.0):
    """Penalty for repeated n-grams: -weight * (1 - distinct n-grams / all n-grams), so 0.0
    for text without repeats and close to -weight for a loop. Too short to hold two n-grams: 0.0.

    >>> rep = repetition_reward(n=2)
    >>> rep(["q"] * 3, ["the cat sat on the mat", "go go go go go", "hi"])
    [0.0, -0.75, 0.0]
    """
    if n < 1:
        raise ValueError(f"repetition: n must be at least 1, got {n}")
    if unit not in UNITS:
        raise ValueError(f"repetition: unit must be one of {UNITS}, got {unit!r}")

    def repetition(prompts, completions, **columns) -> list[float]:
        out = []
        for completion in completions:
            text = as_text(completion)
            tokens = text.lower().split() if unit == "words" else list(text)
            grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
            if len(grams) < 2:
                out.append(0.0)
                continue
            out.append(weight * (len(set(grams)) / len(grams) - 1.0))
        return out

    return repetition
