"""The correctness verifier's own rules: where the answer is, plain numbers, letters, and the
path without math-verify. math-verify's verdicts, timeouts and explain: test_rewards_math_verify.py."""

import time
from fractions import Fraction

import pytest

from grpo_lab import rewards
from grpo_lab.rewards.verifier import Span, answer_span, answers_match, extract_choice, extract_number, plain_number

correct = rewards.build("correctness")


@pytest.mark.parametrize(
    "text, number",
    [
        ("The answer is 1,234.", Fraction(1234)),
        ("\\boxed{3/4}", Fraction(3, 4)),
        ("-7", Fraction(-7)),
        ("12-7", Fraction(7)),  # subtraction, not a negative number
        ("x = (-7)", Fraction(-7)),
        ("It costs $5.50.", Fraction(11, 2)),
        ("\\boxed{\\frac{3}{4}}", Fraction(3, 4)),
        ("\\boxed{-\\frac{3}{4}}", Fraction(-3, 4)),
        ("so 1 234 apples and finally 42 apples", Fraction(42)),
        ("Answer: 42 apples\nI counted 7 twice", Fraction(42)),  # the answer line wins
        ("work: 6*7\n#### 42", Fraction(42)),  # GSM8K style
        ("\\boxed{12} and later 13", Fraction(12)),  # boxed wins
        ("1/0", None),
        ("no number at all", None),
        ("", None),
    ],
)
def test_extract_number(text, number):
    assert extract_number(text) == number


@pytest.mark.parametrize(
    "completion, reference, expected",
    [
        ("The answer is 1,234.", "1234", True),
        ("\\boxed{3/4}", "0.75", True),
        ("0.75", "3/4", True),
        ("-7", "-7", True),
        ("7", "-7", False),
        ("no number at all", "3", False),
        ("19", "19.0", True),
        ("The answer is 5 cm.", "5", True),
        ("50%", "50", True),
        ("\\boxed{5\\text{ cm}}", "5 cm", True),
        ("0.3333333", "1/3", True),  # rounded decimals within the relative tolerance
        ("0.33", "1/3", False),
        ("1" * 5000, "1", False),  # too long to be a number: no crash
        ("\\boxed{\\frac{1}{\\sqrt{2}}}", "\\frac{\\sqrt{2}}{2}", True),  # symbolic
        ("Answer: 2x + x", "3x", True),
        ("\\boxed{x^2 - 1}", "(x-1)(x+1)", True),
        ("\\boxed{x^2 + 1}", "(x-1)(x+1)", False),
        ("\\boxed{__import__('os').system('true')}", "x", False),  # never evaluated
        ("\\boxed{9**99**99}", "x", False),  # power tower refused, no hang
    ],
)
def test_answers_match(completion, reference, expected):
    assert answers_match(completion, reference) is expected


@pytest.mark.parametrize(
    "text, letter",
    [
        ("B", "B"), ("(c)", "C"), ("Answer: (D)", "D"), ("The answer is A.", "A"),
        ("answer: I think C is right", "C"), ("\\boxed{B}", "B"),
        ("Between (A) and (B), I pick (B)", "B"), ("I have no idea", None),
    ],
)
def test_extract_choice(text, letter):
    assert extract_choice(text) == letter


def test_multiple_choice_reference_is_detected():
    got = correct(["q"] * 3, ["Answer: (B)", "Answer: C", "2"], answer=["B", "(b)", "2"])
    assert got == [1.0, 0.0, 1.0]


def test_correctness_reward_on_the_arithmetic_task():
    prompts = ["12+7=", "3-10=", "5*5=", "8/2=", "1+1="]
    completions = ["19", "-7", "twenty-five", "4.0", ""]
    got = correct(prompts, completions, answer=["19", "-7", "25", "4", "2"])
    assert got == [1.0, 1.0, 0.0, 1.0, 0.0]


def test_missing_reference_scores_none_and_numbers_are_accepted_as_references():
    assert correct(["q"] * 2, ["3", "3"], answer=[None, 3]) == [None, 1.0]


def test_conversational_completions():
    completion = [{"role": "assistant", "content": "It is \\boxed{8}"}]
    assert correct(["q"], [completion], answer=["8"]) == [1.0]


def test_custom_column_and_options():
    fn = rewards.build("correctness", column="solution", symbolic=False)
    assert fn(["q"] * 2, ["\\boxed{2x}", "\\boxed{x+x}"], solution=["2x", "2x"]) == [1.0, 0.0]


@pytest.mark.parametrize(
    "text, mode, span",
    [
        ("It is \\boxed{7}.", "lenient", Span("7", "boxed")),
        ("\\boxed{3} first.\nThe final answer is $5$. I hope it is correct.", "strict", Span("$5$", "answer line")),
        ("Answer: 4 apples\nthen \\boxed{6}", "strict", Span("6", "boxed")),  # the later one wins
        ("The answer is $\\boxed{5}$.", "strict", Span("5", "boxed")),
        ("The roots: \\boxed{1}, \\boxed{2} and $\\boxed{3}$", "strict", Span("1, 2, 3", "boxed")),
        ("\\boxed{1} is wrong, so \\boxed{2}", "strict", Span("2", "boxed")),
        ("Final Answer:\n$x = 2$", "strict", Span("$x = 2$", "answer line")),
        ("The answer is 16.20. I apologize for the length.", "strict", Span("16.20", "answer line")),
        ("work\n#### 1,200", "strict", Span("1,200", "answer line")),
        ("\\boxed{3", "lenient", Span("\\boxed{3", "whole text")),  # unclosed: not an answer
        ("so it is 42", "lenient", Span("so it is 42", "whole text")),
        ("so it is 42", "strict", None),
    ],
)
def test_answer_span(text, mode, span):
    assert answer_span(text, mode) == span


@pytest.mark.parametrize(
    "text, value",
    [("1 000", 1000), ("1\\,000", 1000), ("14{,}916", 14916), ("\\$5.50", Fraction(11, 2)), ("50\\%", 50),
     ("\\dfrac{3}{4}", Fraction(3, 4)), ("**12**", 12), ("0,111", None), ("1e5", None), ("2pi", None),
     ("1" * 16, None), ("12-7", None)],
)
def test_plain_number(text, value):
    assert plain_number(text) == value


def test_without_math_verify_a_number_gold_takes_the_last_number():
    fn = rewards.build("correctness", symbolic=False)
    got = fn(["q"] * 3, ["so 1 234 apples and finally 42 apples", "0.3333333", "\\boxed{\\sqrt{17}}"],
             answer=["42", "1/3", "\\sqrt{17}"])
    assert got == [1.0, 1.0, 1.0]


def test_many_unclosed_boxes_are_scanned_once():
    text = "\\boxed{" * 20_000 + "7"
    start = time.perf_counter()
    assert answer_span(text) == Span(text, "whole text")
    assert time.perf_counter() - start < 0.5


def test_correctness_is_fast_on_a_training_batch():
    prompts = [f"{i}+{i + 1}=" for i in range(64)]
    completions = [str(2 * i + 1) if i % 2 else f"The answer is {2 * i}." for i in range(64)]
    answers = [str(2 * i + 1) for i in range(64)]
    correct(prompts, completions, answer=answers)  # warm the reference cache
    start = time.perf_counter()
    for _ in range(20):
        scores = correct(prompts, completions, answer=answers)
    per_batch = (time.perf_counter() - start) / 20
    assert scores == [float(i % 2) for i in range(64)]
    assert per_batch < 0.05, f"{per_batch * 1e3:.1f} ms per batch of 64"


def test_a_completion_cut_off_mid_word_is_no_answer():
    """The tiny model's completions cut at max_new_tokens ("1r2r") were read as their first digits
    by math-verify (and as their last number standing alone without it): a right answer."""
    completions = ["1r2r", "7r", "2wo", "2pj1", "5*u7", "1?1p", "7", "5cm", "so 3+4=7", "3rd"]
    golds = ["1", "7", "2", "2", "5", "1", "7", "5", "7", "3"]
    assert correct(["q"] * 10, completions, answer=golds) == [0.0] * 6 + [1.0] * 4
    assert rewards.build("correctness", symbolic=False)(["q"] * 2, ["1r2r", "7"], answer=["1", "7"]) == [0.0, 1.0]
    why = rewards.verifier.explain("1r2r", "1")
    assert (why["path"], why["reason"]) == ("no answer", "the last number is run into letters (r2r)")
