"""The reward contract: registry, import paths, weighted combination, None and error handling."""

import doctest
import importlib
import math
import sys
import textwrap

import pytest

from grpo_lab import rewards
from grpo_lab.rewards.combine import MAX_MESSAGES_PER_REWARD


def const(value):
    def reward(prompts, completions, **kw):
        return [value] * len(completions)

    return reward


# --- registry -------------------------------------------------------------------------------


def test_available_lists_the_chapter_sources():
    assert set(rewards.available()) >= {
        "correctness", "format", "length", "keywords", "repetition", "code_tests",
        "reward_model", "human_feedback",
    }
    assert rewards.available() == sorted(rewards.available())


def test_unknown_name_is_a_one_line_error_listing_the_registry():
    with pytest.raises(ValueError) as info:
        rewards.build("corectness")
    message = str(info.value)
    assert "corectness" in message and "correctness" in message and "\n" not in message


@pytest.mark.parametrize(
    "name, params, expected",
    [
        ("length", {"maxlen": 3}, "unknown parameter(s) maxlen"),
        ("reward_model", {}, "missing required parameter(s) model"),
        ("length", {"unit": "tokens"}, "unit must be one of"),
        ("format", {"pattern": "("}, "invalid regex"),
        ("no.such.module:f", {}, "cannot import module 'no.such.module'"),
        ("math:no_such_function", {}, "has no attribute"),
        ("math:pi", {}, "is not callable"),
    ],
)
def test_build_errors_say_what_to_fix(name, params, expected):
    with pytest.raises(ValueError) as info:
        rewards.build(name, **params)
    assert expected in str(info.value)


def test_registered_reward_is_named_after_its_registry_entry():
    assert rewards.build("format").__name__ == "format"


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """A user's module with TRL-style reward functions, importable by path."""
    (tmp_path / "my_rewards.py").write_text(textwrap.dedent('''
        def brevity(prompts, completions, **kwargs):
            return [-len(c) / 10 for c in completions]

        def uses_column(prompts, completions, solution, bonus=0.0, **kwargs):
            return [float(c == s) + bonus for c, s in zip(completions, solution)]
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_rewards"
    sys.modules.pop("my_rewards", None)


def test_user_function_by_import_path_works_unchanged(user_module):
    fn = rewards.build(f"{user_module}:brevity")
    assert fn(["p"], ["abc"], answer=["x"], unknown_column=[1]) == [-0.3]


def test_user_function_params_are_bound(user_module):
    fn = rewards.build(f"{user_module}:uses_column", bonus=0.5)
    assert fn.__name__ == "uses_column"
    assert fn(["p", "p"], ["a", "b"], solution=["a", "a"]) == [1.5, 0.5]


# --- score_all: combination ------------------------------------------------------------------


def test_total_is_the_weighted_sum():
    scores = rewards.score_all(
        {"a": (const(1.0), 1.0), "b": (const(0.5), -2.0)}, ["p"] * 3, ["c"] * 3, {}
    )
    assert scores.total == [0.0, 0.0, 0.0]
    assert scores.per_reward == {"a": [1.0] * 3, "b": [0.5] * 3}
    assert scores.errors == {"a": 0, "b": 0} and scores.messages == []


def test_none_is_left_out_of_the_sum_and_total_none_only_when_nobody_scored():
    def sometimes(prompts, completions, **kw):
        return [None, 2.0, None]

    def rarely(prompts, completions, **kw):
        return [None, None, 1.0]

    scores = rewards.score_all(
        {"sometimes": (sometimes, 1.0), "rarely": (rarely, 3.0)}, ["p"] * 3, ["c"] * 3, {}
    )
    assert scores.total == [None, 2.0, 3.0]
    assert scores.errors == {"sometimes": 0, "rarely": 0}  # None is an answer, not an error


def test_none_total_becomes_advantage_zero_in_the_trainer():
    objective = pytest.importorskip("grpo_lab.objective.functions")
    torch = pytest.importorskip("torch")
    reward = (lambda p, c, **k: [1.0, None, 3.0, 2.0], 1.0)
    scores = rewards.score_all({"r": reward}, ["p"] * 4, ["c"] * 4, {})
    as_tensor = torch.tensor([[math.nan if t is None else t for t in scores.total]])
    adv = objective.group_advantages(as_tensor).advantages[0]
    assert adv[1] == 0.0  # no score: advantage 0, and left out of the mean (2.0) and std
    assert adv[0] == pytest.approx(-adv[2]) and adv[3] == pytest.approx(0.0, abs=1e-6)


def test_columns_reach_the_reward_aligned_with_the_samples():
    seen = {}

    def spy(prompts, completions, answer, **kw):
        seen.update(answer=answer, extra=sorted(kw))
        return [1.0] * len(completions)

    columns = {"answer": ["1", "2"], "id": [7, 8]}
    rewards.score_all({"spy": (spy, 1.0)}, ["p1", "p2"], ["c1", "c2"], columns)
    # TRL's call: the columns, plus the trainer's own keywords (completion_ids, trainer_state, log_*)
    assert seen == {"answer": ["1", "2"],
                    "extra": ["completion_ids", "id", "log_extra", "log_metric", "trainer_state"]}


# --- score_all: failures never kill the run ----------------------------------------------------


def test_a_raising_reward_fails_only_the_bad_samples():
    def divide(prompts, completions, answer, **kw):
        return [1.0 / int(a) for a in answer]

    scores = rewards.score_all(
        {"divide": (divide, 1.0), "one": (const(1.0), 1.0)},
        ["p"] * 3,
        ["c"] * 3,
        {"answer": ["2", "0", "4"]},
    )
    assert scores.per_reward["divide"] == [0.5, None, 0.25]
    assert scores.total == [1.5, 1.0, 1.25]
    assert scores.errors == {"divide": 1, "one": 0}
    assert scores.messages == [
        "reward 'divide' failed on sample 1: ZeroDivisionError: float division by zero"
    ]


def test_wrong_length_and_non_numbers_score_none_with_a_message():
    def short(prompts, completions, **kw):
        return [1.0]

    def odd(prompts, completions, **kw):
        return ["high", math.nan, 2, True]

    scores = rewards.score_all({"short": (short, 1.0), "odd": (odd, 1.0)}, ["p"] * 4, ["c"] * 4, {})
    assert scores.per_reward["short"] == [None] * 4 and scores.errors["short"] == 4
    assert scores.per_reward["odd"] == [None, None, 2.0, 1.0] and scores.errors["odd"] == 2
    assert any("returned 1 scores for 4 samples" in m for m in scores.messages)
    assert any("sample 0" in m and "'high' is not a number" in m for m in scores.messages)
    assert any("sample 1" in m and "not finite" in m for m in scores.messages)


def test_a_reward_that_always_raises_gives_none_and_capped_messages():
    def broken(prompts, completions, **kw):
        raise RuntimeError("model server down")

    both = {"broken": (broken, 1.0), "one": (const(1.0), 0.5)}
    scores = rewards.score_all(both, ["p"] * 20, ["c"] * 20, {})
    assert scores.per_reward["broken"] == [None] * 20 and scores.errors["broken"] == 20
    assert scores.total == [0.5] * 20
    assert len(scores.messages) == MAX_MESSAGES_PER_REWARD + 1
    assert scores.messages[-1] == "reward 'broken': ... and 15 more failures"


def test_missing_column_is_reported_not_raised():
    scores = rewards.score_all({"correctness": (rewards.build("correctness"), 1.0)}, ["1+1="], ["2"], {})
    assert scores.total == [None] and scores.errors == {"correctness": 1}
    assert "needs the dataset column 'answer'" in scores.messages[0]


def test_metrics_are_namespaced_and_skip_unscored_samples():
    scores = rewards.score_all(
        {"r": (lambda p, c, **k: [1.0, None, 3.0], 1.0)}, ["p"] * 3, ["c"] * 3, {}
    )
    metrics = scores.metrics()
    assert metrics["rewards/r/mean"] == 2.0 and metrics["rewards/r/std"] == 1.0
    assert metrics["reward/mean"] == 2.0 and metrics["rewards/r/errors"] == 0.0


def test_empty_batch():
    scores = rewards.score_all({"one": (const(1.0), 1.0)}, [], [], {})
    assert scores.total == [] and math.isnan(scores.metrics()["reward/mean"])


# --- every docstring example runs -----------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "module",
    ["registry", "combine", "_text", "verifier", "symbolic", "correctness", "rules",
     "human_feedback", "code_tests", "sandbox"],
)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(f"grpo_lab.rewards.{module}"))
    assert result.failed == 0 and result.attempted > 0
