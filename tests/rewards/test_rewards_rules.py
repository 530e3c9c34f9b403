"""Rule rewards: format, length, keywords, repetition."""

import pytest

from grpo_lab import rewards


def score(name, completions, **params):
    return rewards.build(name, **params)(["prompt"] * len(completions), completions)


# --- format -----------------------------------------------------------------------------------


def test_format_default_is_a_reasoning_block_then_an_answer_block():
    good = "<think>\n7+5=12\n</think>\n<answer>12</answer>\n"
    assert score("format", [good, "<answer>12</answer>", "<answer>12</answer><think>x</think>",
                            good + " trailing words", ""]) == [1.0, 0.0, 0.0, 0.0, 0.0]


def test_format_custom_tags_and_regex():
    assert score("format", ["<answer>4</answer>"], tags=["answer"]) == [1.0]
    assert score("format", ["Answer: 4", "answer is 4"], pattern=r"Answer: \d+") == [1.0, 0.0]
    assert score("format", ["blah Answer: 4 blah"], pattern=r"Answer: \d+", full_match=False) == [1.0]


def test_format_reads_conversational_completions():
    message = [{"role": "assistant", "content": "<think>a</think><answer>b</answer>"}]
    assert score("format", [message]) == [1.0]


# --- length -----------------------------------------------------------------------------------


def test_length_is_zero_inside_the_range_and_a_capped_penalty_outside():
    fn_params = dict(min_len=3, max_len=5, unit="words", penalty_per_unit=0.1, max_penalty=0.5)
    texts = ["a", "a b c", "a b c d e", "a b c d e f g", " ".join("x" * 50)]
    assert score("length", texts, **fn_params) == pytest.approx([-0.2, 0.0, 0.0, -0.2, -0.5])


def test_length_in_characters_without_upper_bound():
    assert score("length", ["", "abcd", "x" * 1000], min_len=2) == pytest.approx([-0.02, 0.0, 0.0])


def test_length_rejects_an_empty_range():
    with pytest.raises(ValueError, match="max_len"):
        rewards.build("length", min_len=10, max_len=5)


# --- keywords ---------------------------------------------------------------------------------


def test_keywords_required_fraction_minus_banned():
    texts = ["Because 7+5=12, therefore 12.", "because", "therefore, as an AI model", "nothing"]
    got = score("keywords", texts, required=["because", "therefore"], banned=["as an AI"])
    assert got == [1.0, 0.5, -0.5, 0.0]


def test_keywords_whole_words_and_case():
    assert score("keywords", ["becausefoo", "BECAUSE"], required=["because"]) == [0.0, 1.0]
    assert score("keywords", ["BECAUSE"], required=["because"], case_sensitive=True) == [0.0]
    assert score("keywords", ["I like C++ a lot", "C"], required=["C++"]) == [1.0, 0.0]


def test_keywords_only_banned_and_string_mistake():
    assert score("keywords", ["fine", "damn"], banned=["damn"], banned_penalty=2.0) == [1.0, -1.0]
    with pytest.raises(ValueError, match="lists of keywords"):
        rewards.build("keywords", required="because")


# --- repetition -------------------------------------------------------------------------------


def test_repetition_penalises_repeated_ngrams():
    texts = ["the cat sat on the mat", "the cat the cat the cat the cat", "hello", ""]
    got = score("repetition", texts, n=2)
    assert got[0] == 0.0 and got[2] == 0.0 and got[3] == 0.0
    assert got[1] == pytest.approx(2 / 7 - 1)  # 7 bigrams, 2 distinct


def test_repetition_in_characters_and_weight():
    assert score("repetition", ["aaaa"], n=1, unit="chars", weight=2.0) == [pytest.approx(-1.5)]
