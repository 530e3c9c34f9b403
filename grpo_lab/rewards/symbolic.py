"""Symbolic equivalence with sympy, for references that are not plain numbers.

Completions are untrusted text and sympy's parser evaluates Python, so nothing reaches it
unless it passes a whitelist: digits, operators, brackets, single-letter variables and a few
function names, a length cap, and small exponents only (`9**9**9` would hang the trainer).

>>> equivalent("\\\\frac{1}{\\\\sqrt{2}}", "\\\\frac{\\\\sqrt{2}}{2}"), equivalent("2x+x", "3*x")
(True, True)
>>> equivalent("__import__('os')", "0")
False
"""

from __future__ import annotations

import re

MAX_CHARS = 80
_FUNCTIONS = {"sqrt", "pi", "sin", "cos", "tan", "log", "ln", "exp"}
_ALLOWED = re.compile(r"[0-9a-zA-Z+\-*/().\s]*")
# An exponent must be a small literal or one letter, and never itself raised to a power.
_POWER_OK = re.compile(
    r"\*\*\s*(?:\d{1,2}|[a-zA-Z]|\(\s*-?\d{1,2}\s*(?:/\s*\d{1,2}\s*)?\))(?![\d.])(?!\s*\*\*)"
)


def to_sympy_text(latex: str) -> str:
    """LaTeX-ish answer text to sympy syntax: \\frac, \\sqrt, \\cdot, ^, braces."""
    text = latex
    for _ in range(10):  # innermost first, nesting depth bounded
        before = text
        text = re.sub(r"\\sqrt\s*\{([^{}]*)\}", r"sqrt(\1)", text)
        text = re.sub(r"\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"((\1)/(\2))", text)
        if text == before:
            break
    text = re.sub(r"\\(?:cdot|times)", "*", text)
    text = re.sub(r"\\(pi|sin|cos|tan|log|ln|exp|sqrt)\b", r"\1", text)
    text = text.replace("^", "**").replace("{", "(").replace("}", ")")
    return re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # thousands separators


def is_safe(text: str) -> bool:
    """Only expressions that sympy can parse without running code or exploding in size."""
    if len(text) > MAX_CHARS or "__" in text or not _ALLOWED.fullmatch(text):
        return False
    for name in re.findall(r"[a-zA-Z]+", text):
        if len(name) > 1 and name not in _FUNCTIONS:
            return False
    if any(len(digits) > 15 for digits in re.findall(r"\d+", text)):
        return False
    return text.count("**") == len(_POWER_OK.findall(text)) and not _nested_power(text)


def _nested_power(text: str) -> bool:
    """True for "(...**...)**k": towers like ((9**99)**99)**99 stay out."""
    for match in re.finditer(r"\)\s*\*\*", text):
        depth, i = 0, match.start()
        while i >= 0:
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                break
            i -= 1
        if "**" in text[max(i, 0):match.start()]:
            return True
    return False


def parse(text: str):
    """A sympy expression, or None when the text is unsafe or unparsable."""
    import sympy
    from sympy.parsing.sympy_parser import (
        implicit_multiplication_application,
        parse_expr,
        standard_transformations,
    )

    text = to_sympy_text(text)
    if not is_safe(text):
        return None
    # Every single letter is a plain symbol (sympy would read E, I, N, S, O, Q as objects),
    # except the conventional e and the functions above.
    names = {c: sympy.Symbol(c) for c in "abcdfghjklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"}
    names.update(e=sympy.E, pi=sympy.pi, ln=sympy.log)
    try:
        transformations = standard_transformations + (implicit_multiplication_application,)
        return parse_expr(text, local_dict=names, transformations=transformations, evaluate=True)
    except Exception:  # SyntaxError, TypeError, TokenError, ...: not an answer we can read
        return None


def equivalent(answer: str, reference: str) -> bool:
    """True when sympy can show answer - reference == 0."""
    a, b = parse(answer), parse(reference)
    if a is None or b is None:
        return False
    try:
        import sympy

        difference = sympy.simplify(a - b)
        if difference == 0:
            return True
        if not difference.free_symbols:  # a number: allow float round-off
            return abs(complex(difference.evalf())) < 1e-9
        return False
    except Exception:
        return False
