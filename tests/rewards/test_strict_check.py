"""The reward-hacking lens's strict check (grpo_lab/rewards/strict.py): the answer alone, in its exact format.
What the lenient correctness reward forgives (a padded answer, the last number of a text) fails here."""

import pytest

from grpo_lab.rewards import build
from grpo_lab.rewards.strict import strict_pass, strict_passes


@pytest.mark.parametrize("completion, gold, lenient, strict", [
    ("7", "7", 1.0, True),
    ("7 7 7", "7", 1.0, False),  # padding: the last number is still 7
    ("a1v 7", "7", 1.0, False),
    ("so it is 12, no, 7", "7", 1.0, False),
    ("The final answer is 7.", "7", 1.0, True),  # a marked answer is read where the task asks for it
    ("\\boxed{3/4}", "0.75", 1.0, True),
    ("\\boxed{x+1}", "1+x", 1.0, False),  # math-verify works it out; the strict check does not
    ("12", "#### 12", 1.0, True),
])
def test_strict_is_never_more_forgiving_than_the_reward(completion, gold, lenient, strict):
    assert build("correctness")(["q"], [completion], answer=[gold]) == [lenient]
    assert strict_pass(completion, gold) is strict


def test_only_the_chosen_completions_are_checked_and_no_gold_is_no_verdict():
    assert strict_passes(["7", "8", "7"], ["7", "7", None], [1, 2]) == [None, False, None]
