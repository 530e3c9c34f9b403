"""One parser per kind of value a page takes from its address or a form field.

An address is typed or shared by anyone, so each value is input: a parser returns the value or None
(the page then says in one line that it ignored it), never raises. `str.isdigit()` is not a number
check: it accepts '²' and '٣', which `int()` refuses or reads as another number, and a 5,000-digit
string passes it and then fails int()'s digit limit (or a later int64) several layers down.

>>> whole_number("140"), whole_number("²"), whole_number("1" * 400), whole_number("0", low=1)
(140, None, None, None)
>>> run_name("demo"), run_name("../etc"), shown("x" * 100)
('demo', None, 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…')
"""

from __future__ import annotations

import re
from typing import Any

from grpo_lab.rundir.layout import valid_run_name

DIGITS = re.compile(r"[0-9]{1,15}")  # ASCII only; 15 digits stay exact in a float64 and an int64
LARGEST = 10**15 - 1
SHOWN_CHARS = 40  # how much of a refused value a warning repeats


def whole_number(text: Any, low: int = 0, high: int = LARGEST) -> int | None:
    """A whole number written in ASCII digits, within [low, high]; None otherwise."""
    if not isinstance(text, str) or not DIGITS.fullmatch(text):
        return None
    value = int(text)
    return value if low <= value <= high else None


def run_name(text: Any) -> str | None:
    """A name a run, sweep or rescore folder could have (layout.valid_run_name); None otherwise."""
    return text if isinstance(text, str) and valid_run_name(text) else None


def shown(text: Any) -> str:
    """A refused value as a warning repeats it: one line, at most SHOWN_CHARS characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= SHOWN_CHARS else flat[:SHOWN_CHARS] + "…"
