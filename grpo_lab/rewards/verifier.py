"""Find the final answer in a completion and judge it against the gold, with math-verify.

**Where the answer is** (`answer_span`). The last *marked* answer: the last `\\boxed{...}` or
the last answer line ("The final answer is ...", "Answer: ...", "#### ..."), whichever comes
later, so a closing "The final answer is 5" wins over an intermediate `\\boxed{3}`. With no
marked answer, `mode="lenient"` (the default) judges the whole text, where math-verify takes
the last number or expression; `mode="strict"` scores 0, so a run can reward the format it
asks for. The gold goes through the same extraction (always lenient): a `\\boxed{}` gold, a
worked solution or a GSM8K "... #### 72" gold is reduced to its answer.

**Who decides** (`Verdict.path`), cheapest first:
- `choice`: a letter gold ("B", "(b)") is multiple choice: the letter picked in the answer.
- `number`: both answers are plain numbers (`-7`, `0.75`, `3/4`, `\\frac{3}{4}`, `1,234`,
  `14{,}916`, `1 000`, with a unit or `%` allowed and ignored, as before). Decided here only
  where math-verify would say the same: equal values are right; different integers or
  fractions are wrong; decimals closer than 10^-float_rounding go to math-verify's rounding.
- `no answer`: nothing in the answer could hold a number (a number gold), its last number is run
  into letters ("1r2r", "7r": math-verify would read the first digits and score a cut-off
  completion right), or no marked answer in strict mode: 0, decided here.
- `math-verify`: everything else (expressions, equations, intervals, sets, matrices, LaTeX
  shorthand such as `\\frac13`), judged in a child process under a time limit
  (grpo_lab/rewards/math_verify_pool.py).
- `timeout`, `error`: math-verify gave no verdict in time, or its process failed: score None
  (the reward names them in its `problems`, so score_all counts them as reward errors).
- `text`: with `symbolic=False` there is no math-verify: the last number of the answer for a
  number gold, else normalised text.

>>> [v.score for v in judge(["19", "The answer is 1,234.", "12-7 = 5"], ["19", "1234", "-7"])]
[1.0, 1.0, 0.0]
>>> v = judge(["So 3/2... The final answer is $\\\\frac{1+\\\\sqrt{5}}{2}$"], ["2"])[0]
>>> v.score, v.path, v.answer
(0.0, 'math-verify', '$\\\\frac{1+\\\\sqrt{5}}{2}$')
>>> explain("\\\\boxed{x \\\\geq 5}", "$x >= 5$")["verdict"]
1.0
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from functools import lru_cache

from grpo_lab.rewards import math_verify_pool

MODES = ("lenient", "strict")
PATHS = ("choice", "number", "no answer", "math-verify", "timeout", "error", "text", "no gold")
MAX_DIGITS = 15  # longer numbers go to math-verify (and never reach float round-off here)
# The most of an answer math-verify is given: its last characters, where a final answer is. Its parsing
# grows faster than the text (a 1 MB answer ran past the 5 s limit; 4 of them took 28 s of a rescore
# from the page, and a child killed each time); a real final answer, even a matrix, is far shorter.
MAX_JUDGED_CHARS = 2_000

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
# "The final answer is $5$.", "Answer: 42", "#### 72"; an empty rest of line takes the next line.
_ANSWER_LINE = re.compile(r"(?:\banswer\s*(?:is|:|=)|####)[ \t]*:?[ \t]*(?:\n[ \t]*)?([^\n]*)", re.IGNORECASE)
# What may separate answers boxed one by one: "\\boxed{1}, \\boxed{2}", "$\\boxed{1}$ and $\\boxed{2}$"
_BETWEEN_BOXES = re.compile(r"(?:\s|[,;&$]|\\[()\[\]]|\\q?quad|\\text\s*\{\s*(?:and|or)?\s*\}|\band\b|\bor\b)*")
_SENTENCE_END = re.compile(r"\.\s+(?=[A-Z])")  # "$16,386.20$. I apologize ...": the answer ends here
_I_HOPE = re.compile(r"\.?\s*I hope it is correct.*$", re.IGNORECASE)  # Minerva's closing phrase
_PLAIN = re.compile(r"(-?)(?:([1-9]\d{0,2}(?:,\d{3})+|\d+)(?:\.(\d+))?|\.(\d+))(?:\s*/\s*([1-9]\d*))?")
_SPACED_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?:(?: |\\ |\\,|\{,\})\d{3})+(?![\d])")
_SEPARATOR = re.compile(r"\\ |\\,|\{,\}| ")
_TEXT_COMMAND = re.compile(r"\\(?:text|mathrm|textbf|mbox|operatorname)\s*\{([^{}]*)\}")
_FRAC_VARIANT = re.compile(r"\\[dtc]frac")
_NUMBER_FRAC = re.compile(r"\\frac\{\s*(-?\d+)\s*\}\{\s*(\d+)\s*\}")
_DEGREES = re.compile(r"\^\s*\{?\\circ\}?")
_NUMBER = re.compile(r"((?<![\w.])-?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+))(?:\s*/\s*(\d+))?")
_CHOICE = re.compile(r"(?<![A-Za-z'])([A-J])(?![A-Za-z'])")
_DELIMITED = re.compile(r"\$|\\\(|\\\[")
_LATEX_MARKUP = re.compile(r"[\\^_{}]")
_NUMBER_LIKE = re.compile(r"[-+]?[$€£]?\d+(?:[ ,.]\d+)*%?")  # "1 000", "1000,99" (not "2, 3")
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
_MATH_WORDS = {"pi", "e", "i", "sqrt"}  # after a number these are maths, not a unit
# The last number of an answer and the letters touching it: "1r2r" -> ("r", "2", "r")
_LAST_NUMBER = re.compile(r"([A-Za-z?]*)(\d+(?:[.,]\d+)*)([A-Za-z?]*)(?!.*\d)", re.DOTALL)
# Units written on a number with no space ("5cm", "3rd"); other letters there are not a unit ("2wo")
_GLUED_UNITS = {"cm", "mm", "m", "km", "kg", "g", "mg", "s", "ms", "h", "hr", "hrs", "min", "l", "ml", "lb", "lbs",
                "oz", "ft", "in", "mph", "kmh", "k", "am", "pm", "st", "nd", "rd", "th", "yr", "yrs"}


@dataclass(frozen=True)
class Judging:
    """How an answer is judged: `judge`'s, `explain`'s and the correctness reward's options (its
    reward_params, but `column`), declared here once; each of those functions takes them as **options
    and shows them in its signature (`takes_judging`).

    mode: "lenient" judges the last number or expression when there is no `\\boxed{}` or answer line,
    "strict" scores that 0; symbolic: False never calls math-verify (numbers, letters and plain text
    only); multiple_choice: None detects a letter gold, True/False force it; float_rounding: decimals
    compared when a float is involved; timeout_s: wall-time limit per pair for math-verify; workers:
    the most child processes it grows to while pairs wait (default one per CPU core, at most 8).
    """

    mode: str = "lenient"
    symbolic: bool = True
    multiple_choice: bool | None = None
    float_rounding: int = 6
    timeout_s: float = 5.0
    workers: int | None = None


def takes_judging(*, but: tuple[str, ...] = ()):
    """A decorator: `fn(..., **options)` gets the signature `fn(..., *, mode="lenient", symbolic=True, ...)`,
    Judging's fields (those in `but` left out), so `help()` and reward_params checks (rewards/registry.py,
    which reads signatures) see each option by name.

    >>> @takes_judging(but=("workers",))
    ... def f(text, **options): return Judging(**options)
    >>> str(inspect.signature(f))
    "(text, *, mode: 'str' = 'lenient', symbolic: 'bool' = True, multiple_choice: 'bool | None' = None, \
float_rounding: 'int' = 6, timeout_s: 'float' = 5.0)"
    """
    def wrap(fn):
        sig = inspect.signature(fn)
        own = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        options = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type)
                   for f in dataclasses.fields(Judging) if f.name not in but]
        fn.__signature__ = sig.replace(parameters=[*own, *options])
        return fn
    return wrap


@dataclass(frozen=True)
class Span:
    text: str  # the answer as written
    where: str  # "boxed", "answer line" or "whole text"


@dataclass(frozen=True)
class Verdict:
    score: float | None  # 1.0 right, 0.0 wrong, None no verdict (see path and reason)
    path: str  # who decided, one of PATHS
    reason: str  # one line for a person
    answer: str | None = None  # what was taken from the completion as its answer
    gold: str | None = None  # what was taken from the gold
    answer_read: str | None = None  # how that was read: the number, the letter, math-verify's sympy
    gold_read: str | None = None


@dataclass(frozen=True, slots=True)
class _Number:
    value: Fraction  # exact, as written
    decimal: bool  # written with a decimal point: math-verify reads a float and rounds
    percent: bool


# --- where the answer is ----------------------------------------------------------------------


def answer_span(text: str, mode: str = "lenient") -> Span | None:
    """The completion's final answer (see the module docstring); None: strict and unmarked.

    >>> answer_span("\\\\boxed{3} is a guess. The final answer is 5.")
    Span(text='5', where='answer line')
    >>> answer_span("The answer is $\\\\boxed{5}$"), answer_span("7", mode="strict")
    (Span(text='5', where='boxed'), None)
    """
    boxed = _last_boxed(text) if "box" in text else None
    line = None
    if "answer" in text.lower() or "####" in text:
        found = [m for m in _ANSWER_LINE.finditer(text) if m.group(1).strip()]
        line = found[-1] if found else None
    if line is not None and (boxed is None or line.start() > boxed[0]):
        content = _SENTENCE_END.split(_I_HOPE.sub("", line.group(1)), maxsplit=1)[0]
        return Span(content.strip().removesuffix(".").strip(), "answer line")
    if boxed is not None:
        return Span(boxed[1].strip(), "boxed")
    return Span(text.strip(), "whole text") if mode == "lenient" else None


def _last_boxed(text: str) -> tuple[int, str] | None:
    """(start, content) of the last \\boxed{...} (braces balanced), None if none is closed.
    Several answers boxed one by one ("\\boxed{1} and \\boxed{2}") are one answer, "1, 2"."""
    closing, open_at = {}, []  # brace position -> its closing brace; one pass, however many boxes
    for brace in re.finditer(r"[{}]", text):
        if brace.group() == "{":
            open_at.append(brace.start())
        elif open_at:
            closing[open_at.pop()] = brace.start()
    boxes = [(m.start(), closing[m.end() - 1] + 1, text[m.end():closing[m.end() - 1]])  # (start, end, content)
             for m in _BOXED.finditer(text) if m.end() - 1 in closing]
    if not boxes:
        return None
    run = [boxes[-1]]
    for box in reversed(boxes[:-1]):
        if box[1] > run[0][0] or not _BETWEEN_BOXES.fullmatch(text[box[1]:run[0][0]]):
            break
        run.insert(0, box)
    return run[0][0], ", ".join(box[2].strip() for box in run)


def clean(text: str) -> str:
    """Strip LaTeX dressing, markdown bold and currency signs; keep the maths."""
    text = text.replace("\u2212", "-").replace("\\!", "").replace("**", "")
    text = _SPACED_THOUSANDS.sub(lambda m: _SEPARATOR.sub("", m.group()), text)
    text = text.replace("{,}", ",").replace("\\,", "").replace("\\;", " ")
    text = _TEXT_COMMAND.sub(r"\1", text)
    text = _FRAC_VARIANT.sub(r"\\frac", text)
    text = _NUMBER_FRAC.sub(r"\1/\2", text)
    text = _DEGREES.sub("°", text)
    text = text.replace("\\left", "").replace("\\right", "").replace("\\%", "%").replace("\\$", "$")
    text = text.replace("$", "")
    return text.strip().rstrip(".").strip()


# --- numbers ----------------------------------------------------------------------------------


def plain_number(text: str) -> Fraction | None:
    """The value when the whole text is one plain number (units and % allowed), else None.

    >>> plain_number("14{,}916"), plain_number("-\\\\frac{3}{4}"), plain_number("5 cm")
    (Fraction(14916, 1), Fraction(-3, 4), Fraction(5, 1))
    >>> plain_number("1e5"), plain_number("3x"), plain_number("1000,99")
    (None, None, None)
    """
    number = _plain(text)
    return None if number is None else number.value


def _plain(text: str) -> _Number | None:
    text = text.strip()
    digits = text[1:] if text[:1] == "-" else text
    if digits.isascii() and digits.isdigit() and len(digits) <= MAX_DIGITS:  # "7", "-12": the demo's answers
        return _Number(Fraction(int(text)), decimal=False, percent=False)
    text = clean(text)
    match = _PLAIN.match(text)
    if not match:
        return None
    rest = text[match.end():]
    if rest.strip() and not _is_unit(rest):
        return None
    sign, whole, decimals, bare, den = match.groups()
    if sum(c.isdigit() for c in match.group()) > MAX_DIGITS:
        return None
    value = Fraction((whole or "0").replace(",", "") + "." + (decimals or bare or "0"))
    if den:
        value /= int(den)
    return _Number(-value if sign else value, decimal=bool(decimals or bare), percent="%" in rest)


def _is_unit(rest: str) -> bool:
    """ "cm", " m/s", "%" after a number are units; "x" in "3x" or "pi" in "2pi" are maths."""
    word = rest.strip()
    if not re.fullmatch(r"[A-Za-z%°$][A-Za-z%°/.\s]*", word) or word.lower() in _MATH_WORDS:
        return False
    return not (len(word) == 1 and word.isalpha() and not rest[0].isspace())


def _compare(answer: _Number, gold: _Number, float_rounding: int) -> bool | None:
    """math-verify's verdict on two plain numbers, or None where only its rounding can tell."""
    if answer.value == gold.value:
        return True  # a unit or a % sign is ignored, as this reward always did
    if answer.percent or gold.percent:
        return None  # 0.5 for 50%: math-verify's call
    if not (answer.decimal or gold.decimal):
        return False  # integers and fractions: math-verify compares them exactly
    if abs(answer.value - gold.value) > Fraction(1, 10**float_rounding):
        return False  # too far apart to round to the same float_rounding decimals
    return None


def run_into_letters(text: str) -> str | None:
    """The last number with the letters (or "?") it touches, when there are any ("r2r"), else None.

    A number gold wants a number; "1r2r" or "2pj1" (completions cut at max_new_tokens) are none, yet
    math-verify reads such a text's first digits ("1", "2") and `_plain` takes "2wo" for 2 "wo":
    either rewards the cut-off text. A unit written on the number ("5cm", "3rd") or a maths word
    ("2pi") is not run into; LaTeX is left to the readers.

    >>> run_into_letters("1r2r"), run_into_letters("7r"), run_into_letters("2wo"), run_into_letters("1?")
    ('r2r', '7r', '2wo', '1?')
    >>> [run_into_letters(t) for t in ("step1: 3+4=7", "5cm", "2pi", "6 apples", "\\\\frac13", "42.")]
    [None, None, None, None, None, None]
    """
    if "\\" in text:
        return None
    match = _LAST_NUMBER.search(text)
    if match is None:
        return None
    before, _, after = match.groups()
    if not before and (not after or after.lower() in _MATH_WORDS | _GLUED_UNITS):
        return None
    return match.group()


def extract_number(text: str) -> Fraction | None:
    """The last number in the (lenient) answer span, or None: the rule without math-verify.

    >>> extract_number("so 1 234 apples and finally 42 apples"), extract_number("12-7")
    (Fraction(42, 1), Fraction(7, 1))
    """
    for body, den in reversed(_NUMBER.findall(clean(answer_span(text).text))):
        try:
            value = Fraction(body.replace(",", ""))
            return value / int(den) if den else value
        except (ValueError, ZeroDivisionError):  # "1/0"; digits past Python's int limit
            continue
    return None


# --- multiple choice --------------------------------------------------------------------------


def is_choice(reference) -> bool:
    """A multiple-choice reference: one letter A-J, optionally "(B)" or "B."."""
    return re.fullmatch(r"\(?[A-Ja-j][).]?", str(reference).strip()) is not None


def extract_choice(text: str, mode: str = "lenient") -> str | None:
    """The letter the completion picks: from its marked answer, else (lenient) a bare "B" /
    "(B)" completion or the last "(B)" in the text."""
    span = answer_span(text, "strict")
    if span is not None:
        cleaned = clean(span.text)
        for match in _CHOICE.finditer(cleaned):
            letter = match.group(1)
            # "A" and "I" are also words: "I think B", "A is wrong"
            if letter in "AI" and re.match(r"\s+[a-z]", cleaned[match.end():]):
                continue
            return letter
    if mode == "strict":
        return None
    short = re.fullmatch(r"\(?([A-Ja-j])[).:]?", clean(text))
    if short:
        return short.group(1).upper()
    bracketed = re.findall(r"\(([A-J])\)", text)
    return bracketed[-1] if bracketed else None


# --- judging ----------------------------------------------------------------------------------


# Verdicts of math-verify, by job: a GRPO group often repeats an answer, an epoch repeats the
# golds, and a pair that ran over time must not wait out its limit again.
_CACHE: OrderedDict = OrderedDict()
_CACHE_SIZE = 8192
_CACHE_LOCK = threading.Lock()


@takes_judging()
def judge(completions: list[str], golds: list, **options) -> list[Verdict]:
    """A Verdict per (completion, gold) pair; a gold of None gets score None ("no gold"). `options`:
    Judging's fields (mode, symbolic, multiple_choice, float_rounding, timeout_s, workers).
    """
    how = Judging(**options)
    if how.mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}; got {how.mode!r}")
    verdicts: list[Verdict | None] = [None] * len(completions)
    waiting: dict[math_verify_pool.Job, list[tuple[int, _ForMathVerify]]] = {}  # one job per distinct pair
    for i, (completion, gold) in enumerate(zip(completions, golds, strict=True)):
        decided = _decide_here(completion, gold, how.mode, how.symbolic, how.multiple_choice, how.float_rounding)
        if isinstance(decided, Verdict):
            verdicts[i] = decided
        else:
            waiting.setdefault(decided.job, []).append((i, decided))
    outcomes = _math_verify(list(waiting), how.timeout_s, how.workers)
    for job, outcome in zip(waiting, outcomes):
        for i, pending in waiting[job]:
            verdicts[i] = _from_outcome(outcome, pending.span, pending.gold_span)
    return verdicts


@takes_judging(but=("workers",))
def explain(completion: str, gold, **options) -> dict:
    """Why a completion scores what it scores, for a person (the dashboard's Groups page).

    Keys: `verdict` (1.0 / 0.0 / None), `path` (who decided: number, choice, math-verify,
    no answer, timeout, error, text, no gold), `reason` (one line), `answer` and `gold` (what
    was taken from each), `answer_read` and `gold_read` (how they were read: the number, the
    letter, or math-verify's sympy form), `mode`. Same arguments and rules as the reward.

    >>> why = explain("I think 12 ... \\\\boxed{7}", "... so she has 7 left.\\n#### 7")
    >>> why["verdict"], why["path"], why["answer"], why["gold"]
    (1.0, 'number', '7', '7')
    >>> explain("7", "7", mode="strict")["reason"]
    'strict mode: no \\\\boxed{} and no answer line'
    """
    how = Judging(**options, workers=1)  # one child is plenty here
    verdict = judge([completion], [gold], **asdict(how))[0]
    fields = asdict(verdict)
    return {"verdict": fields.pop("score"), **fields, "mode": how.mode}


def answers_match(completion: str, reference, symbolic: bool = True, multiple_choice=None, mode="lenient") -> bool:
    """True when the verdict is "right" (no verdict counts as not right).

    >>> answers_match("so \\\\boxed{3/4}", "0.75"), answers_match("12-7 = 5", "-7")
    (True, False)
    """
    verdicts = judge([completion], [reference], mode=mode, symbolic=symbolic, multiple_choice=multiple_choice)
    return verdicts[0].score == 1.0


@dataclass(frozen=True)
class _ForMathVerify:
    job: math_verify_pool.Job
    span: Span
    gold_span: Span


def _decide_here(completion, gold, mode, symbolic, multiple_choice, float_rounding) -> Verdict | _ForMathVerify:
    """A Verdict when this process can decide, else the job for math-verify."""
    if gold is None:
        return Verdict(score=None, path="no gold", reason="the sample has no gold answer")
    gold = str(gold)
    if multiple_choice or (multiple_choice is None and is_choice(gold)):
        want = re.sub(r"[^A-Ja-j]", "", gold).upper()
        got = extract_choice(completion, mode)
        why = "no letter picked" if got is None else "same letter" if got == want else "another letter"
        return Verdict(score=float(got == want), path="choice", reason=why, answer=got, gold=gold.strip(),
                       answer_read=got, gold_read=want)
    gold_span, gold_number = _read_gold(gold)
    span = answer_span(completion, mode)
    if span is None:
        return Verdict(score=0.0, path="no answer", reason="strict mode: no \\boxed{} and no answer line",
                       gold=gold_span.text)
    if gold_number is not None:
        if (glued := run_into_letters(span.text)) is not None:
            return Verdict(score=0.0, path="no answer", reason=f"the last number is run into letters ({glued})",
                           answer=span.text, gold=gold_span.text)
        number = _plain(span.text)
        if number is not None:
            same = _compare(number, gold_number, float_rounding)
            if same is not None:
                why = "equal numbers" if same else "different numbers"
                return Verdict(score=float(same), path="number", reason=why, answer=span.text, gold=gold_span.text,
                               answer_read=_show(number.value), gold_read=_show(gold_number.value))
        elif not re.search(r"[\d$\\\[]", span.text):  # math-verify could not read a number either
            return Verdict(score=0.0, path="no answer", reason="no number in the answer", answer=span.text,
                           gold=gold_span.text)
    if not symbolic:
        return _judge_as_text(span, gold_span, gold_number, float_rounding)
    if len(span.text) > MAX_JUDGED_CHARS:  # bounded work per sample (MAX_JUDGED_CHARS)
        span = replace(span, text=span.text[-MAX_JUDGED_CHARS:])
    job = math_verify_pool.Job(gold=_for_parser(gold_span, gold=True), answer=_for_parser(span, gold=False),
                               float_rounding=float_rounding)
    return _ForMathVerify(job=job, span=span, gold_span=gold_span)


@lru_cache(maxsize=65536)  # the same golds come back every epoch
def _read_gold(gold: str) -> tuple[Span, _Number | None]:
    span = answer_span(gold.strip())
    return span, _plain(span.text)


def _judge_as_text(span: Span, gold_span: Span, gold_number: _Number | None, float_rounding: int) -> Verdict:
    if gold_number is not None:
        got = extract_number(span.text)
        same = got is not None and round(got, float_rounding) == round(gold_number.value, float_rounding)
        return Verdict(score=float(same), path="text", reason="last number " + ("matches" if same else "differs"),
                       answer=span.text, gold=gold_span.text, answer_read=None if got is None else _show(got),
                       gold_read=_show(gold_number.value))
    same = _normalise_text(clean(span.text)) == _normalise_text(clean(gold_span.text))
    return Verdict(score=float(same), path="text", reason="same text" if same else "different text",
                   answer=span.text, gold=gold_span.text)


def _for_parser(span: Span, gold: bool) -> str:
    """The text math-verify's parser should see. It reads maths inside `$...$`, `\\[...\\]` or
    `\\boxed{}` as LaTeX and, outside them, only numbers and simple expressions."""
    text = span.text
    if span.where == "boxed":
        return "\\boxed{" + text + "}"
    if _DELIMITED.search(text):
        return text
    if _LATEX_MARKUP.search(text):
        return "$" + text + "$"  # bare LaTeX: "x \geq 5", "\frac13"
    if span.where == "whole text" and not gold:
        return text  # an unmarked completion, read as math-verify reads one ("=4", "6 apples")
    if _NUMBER_LIKE.fullmatch(text) or _WORD.search(text):
        return text  # "1 000", "1000,99" (LaTeX reads them as a product, a set); prose
    return "$" + text + "$"  # relations, tuples, intervals: "x >= 5", "(1, 4.5)", "k=1"


def _math_verify(jobs: list, timeout_s: float, workers: int | None) -> list:
    """Outcomes for the jobs: from the cache, else from the pool (and then cached)."""
    with _CACHE_LOCK:
        outcomes = [_CACHE.get(job) for job in jobs]
    todo = [job for job, outcome in zip(jobs, outcomes) if outcome is None]
    if todo:
        pool = math_verify_pool.shared_pool(workers or math_verify_pool.default_workers())
        fresh = dict(zip(todo, pool.judge(todo, timeout_s)))
        with _CACHE_LOCK:
            for job, outcome in fresh.items():
                _CACHE[job] = outcome
                _CACHE.move_to_end(job)
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
        outcomes = [fresh.get(job, outcome) for job, outcome in zip(jobs, outcomes)]
    return outcomes


def _from_outcome(outcome: math_verify_pool.Outcome, span: Span, gold_span: Span) -> Verdict:
    if outcome.verdict is None:
        return Verdict(score=None, path="timeout" if outcome.timed_out else "error",
                       reason=f"math-verify: {outcome.error}", answer=span.text, gold=gold_span.text)
    if outcome.answer is None:
        why = "math-verify found no answer to read"
    else:
        why = "math-verify: equal" if outcome.verdict else "math-verify: not equal"
    return Verdict(score=float(outcome.verdict), path="math-verify", reason=why, answer=span.text,
                   gold=gold_span.text, answer_read=outcome.answer, gold_read=outcome.gold)


def _show(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _normalise_text(text: str) -> str:
    return re.sub(r"\s+", "", text).lower()
