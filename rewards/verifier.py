"""Find the final answer in free text and compare it with a reference.

Where the answer is looked for, first match wins: the last `\\boxed{...}`, the last
"answer: ..." / "answer is ..." / "#### ..." line, else the whole text. Inside that span a
numeric reference is compared with the *last* number (signs, decimals, `3/4`, `\\frac{3}{4}`,
`1,234` and units such as "$", "%", "cm" handled); any other reference is compared
symbolically with sympy, then as normalised text.

>>> extract_number("The answer is 1,234.")
Fraction(1234, 1)
>>> answers_match("so \\\\boxed{3/4}", "0.75"), answers_match("12-7 = 5", "-7")
(True, False)
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

_SIGNED = r"(?<![\w.])-?"  # a minus glued to a preceding digit is subtraction ("12-7"), not a sign
_BODY = r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:[eE][-+]?\d{1,3})?|\.\d+)"
_NUMBER = re.compile(rf"({_SIGNED}{_BODY})(?:\s*/\s*(\d+))?")
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_LINE = re.compile(r"(?:answer\s*(?:is|:|=)|####)\s*:?\s*([^\n]*)", re.IGNORECASE)
_MATH_WORDS = {"pi", "e", "i", "sqrt"}  # a trailing word that is maths, not a unit


def answer_span(text: str) -> str:
    """The part of `text` that holds the final answer (see the module docstring)."""
    if "box" in text:
        boxed = _last_boxed(text)
        if boxed is not None:
            return boxed
    if "answer" in text.lower() or "####" in text:
        lines = [m.group(1) for m in _ANSWER_LINE.finditer(text) if m.group(1).strip()]
        if lines:
            return lines[-1]
    return text


def extract_number(text: str) -> Fraction | None:
    """The last number in the answer span, exactly, or None when there is none."""
    numbers = _NUMBER.findall(clean(answer_span(text)))
    for body, den in reversed(numbers):
        value = _to_fraction(body, den)
        if value is not None:
            return value
    return None


def parse_reference_number(reference: str) -> Fraction | None:
    """The reference as a number when it *is* one (units allowed: "5 cm", "$3", "50%")."""
    return _parse_reference_number(str(reference))


@lru_cache(maxsize=65536)  # the same references come back every epoch
def _parse_reference_number(reference: str) -> Fraction | None:
    text = clean(reference)
    match = _NUMBER.match(text)
    if not match:
        return None
    rest = text[match.end():]
    if rest.strip() and not _is_unit(rest):
        return None
    return _to_fraction(match.group(1), match.group(2))


def _is_unit(rest: str) -> bool:
    """ "cm", " m/s", "%" after a number are units; "x" in "3x" or "pi" in "2pi" are maths."""
    word = rest.strip()
    if not re.fullmatch(r"[A-Za-z%°$][A-Za-z%°/.\s]*", word) or word.lower() in _MATH_WORDS:
        return False
    return not (len(word) == 1 and word.isalpha() and not rest[0].isspace())


def numbers_equal(a: Fraction, b: Fraction, rel_tol: float = 1e-6) -> bool:
    """Exact for integers and fractions; a relative tolerance covers rounded decimals."""
    if a == b:
        return True
    try:
        return math.isclose(float(a), float(b), rel_tol=rel_tol, abs_tol=1e-12)
    except OverflowError:  # beyond float range: only exact equality counts
        return False


_CHOICE = re.compile(r"(?<![A-Za-z'])([A-J])(?![A-Za-z'])")


def is_choice(reference) -> bool:
    """A multiple-choice reference: one letter A-J, optionally "(B)" or "B."."""
    return re.fullmatch(r"\(?[A-Ja-j][).]?", str(reference).strip()) is not None


def extract_choice(text: str) -> str | None:
    """The letter the completion picks: from the answer span, "(B)", or a bare "B"."""
    raw = answer_span(text)
    span = clean(raw)
    if raw is not text:  # a boxed or "answer:" span was found
        for match in _CHOICE.finditer(span):
            letter = match.group(1)
            # "A" and "I" are also words: "I think B", "A is wrong"
            if letter in "AI" and re.match(r"\s+[a-z]", span[match.end():]):
                continue
            return letter
    short = re.fullmatch(r"\(?([A-Ja-j])[).:]?", clean(text))
    if short:
        return short.group(1).upper()
    bracketed = re.findall(r"\(([A-J])\)", text)
    return bracketed[-1] if bracketed else None


def answers_match(
    completion: str, reference, symbolic: bool = True, rel_tol: float = 1e-6, multiple_choice=None
) -> bool:
    """True when the completion's final answer equals `reference` (a string or number).

    multiple_choice: None detects a letter reference ("B", "(B)"); True/False force it.
    """
    reference = str(reference).strip()
    if multiple_choice or (multiple_choice is None and is_choice(reference)):
        return extract_choice(completion) == re.sub(r"[^A-Ja-j]", "", reference).upper()
    ref_number = parse_reference_number(reference)
    if ref_number is not None:
        got = extract_number(completion)
        return got is not None and numbers_equal(got, ref_number, rel_tol)
    span = clean(answer_span(completion))
    ref_text = clean(reference)
    if _normalise_text(span) == _normalise_text(ref_text):
        return True
    if symbolic:
        from rewards.symbolic import equivalent  # sympy is imported only when needed

        return equivalent(span, ref_text)
    return False


def clean(text: str) -> str:
    """Strip LaTeX dressing and currency/percent signs; keep the maths."""
    text = text.replace("\u2212", "-").replace("\\!", "").replace("\\,", "").replace("\\;", " ")
    text = re.sub(r"\\(?:text|mathrm|textbf|mbox|operatorname)\s*\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\\[dt]frac", r"\\frac", text)
    text = re.sub(r"\\frac\{\s*(-?\d+)\s*\}\{\s*(\d+)\s*\}", r"\1/\2", text)
    text = re.sub(r"\^\s*\{?\\circ\}?", "°", text)
    text = text.replace("\\left", "").replace("\\right", "").replace("\\%", "%").replace("\\$", "$")
    text = text.replace("$", "")
    return text.strip().rstrip(".").strip()


def _normalise_text(text: str) -> str:
    return re.sub(r"\s+", "", text).lower()


def _to_fraction(body: str, den: str = "") -> Fraction | None:
    try:
        value = Fraction(body.replace(",", ""))
        if den:
            value /= Fraction(den)  # ZeroDivisionError for "1/0"
        return value
    except (ValueError, ZeroDivisionError):
        return None


def _last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...}, braces balanced; None if unclosed."""
    matches = list(_BOXED.finditer(text))
    if not matches:
        return None
    start = matches[-1].end()
    depth = 1
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i]
    return None
