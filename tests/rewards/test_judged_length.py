"""The work math-verify does per sample is bounded: a planted 1 MB answer (a rescore from the page on a big
run) is judged on its last MAX_JUDGED_CHARS characters, where a final answer is, not parsed whole."""

from __future__ import annotations

from grpo_lab.rewards import verifier


def test_a_megabyte_answer_reaches_math_verify_cut_to_the_bound():
    huge = "The final answer is $" + "x + " * 250_000 + "1$"  # an answer line of 1 MB
    pending = verifier._decide_here(huge, "2", "lenient", True, None, 6)
    assert len(pending.job.answer) <= verifier.MAX_JUDGED_CHARS + 20, len(pending.job.answer)
    bare = "1+" * 500_000 + "1"  # no answer line: lenient mode judges the whole text
    pending = verifier._decide_here(bare, "2", "lenient", True, None, 6)
    assert len(pending.job.answer) <= verifier.MAX_JUDGED_CHARS + 20, len(pending.job.answer)
    short = verifier._decide_here("so it is $\\frac{1}{2}$", "0.5", "lenient", True, None, 6)
    assert "frac" in short.job.answer  # a usual answer is judged as it was
