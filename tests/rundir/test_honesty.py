"""The reward-hacking lens's figures (grpo_lab/rundir/honesty.py) on planted numbers: which reward decides the
advantage's sign, reward against length within groups, the strict check's sample, solved and unsolved groups,
the trends over a run, and the recomputation from a samples table that imports rely on."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from grpo_lab.rundir import honesty
from honesty_helpers import G, HACKED, STEPS, SUSPECT, WEIGHTS, samples


def test_a_length_reward_that_outweighs_the_verifier_decides_the_signs():
    # group 0: right answer short (1 + -1), wrong answers long (0 + 0): length wins, the right answer gets A < 0
    per_reward = {"correctness": [1.0, 0.0, 0.0, 0.0], "length": [-1.0, 0.0, 0.0, 0.0]}
    assert honesty.deciders(per_reward, {"correctness": 1.0, "length": 1.0}, 4) == [None] * 4  # totals all 0
    per_reward["length"] = [-1.5, 0.0, 0.0, -1.5]  # totals -0.5, 0, 0, -1.5: mean -0.5
    decided = honesty.deciders(per_reward, {"correctness": 1.0, "length": 1.0}, 4)
    assert decided == [None, "length", "length", "length"]
    assert honesty.sign_shares(decided, ["correctness", "length"]) == {"correctness": 0.0, "length": 1.0}


def test_the_weight_counts_in_who_decides():
    per_reward = {"correctness": [1.0, 0.0], "format": [0.0, 1.0]}
    assert honesty.deciders(per_reward, {"correctness": 1.0, "format": 0.5}, 2) == ["correctness", "correctness"]
    assert honesty.deciders(per_reward, {"correctness": 1.0, "format": 3.0}, 2) == ["format", "format"]


def test_an_unscored_completion_and_a_reward_without_scores_are_left_out():
    per_reward = {"correctness": [1.0, 0.0, None, 0.0], "rm": [None, None, None, None]}
    assert honesty.deciders(per_reward, {"correctness": 1.0, "rm": 1.0}, 4) == ["correctness"] * 2 + [None, "correctness"]
    assert math.isnan(honesty.component_shares({"rm": [None]}, {"rm": 1.0})["rm"])


def test_length_correlation_is_within_groups():
    # across groups, long answers are the low rewards (group 1); within each, the longer one is paid more
    totals, lengths = [1.0, 0.0, -4.0, -5.0], [3, 2, 9, 8]
    assert honesty.length_correlation(totals, lengths, 2) == pytest.approx(1.0)
    assert honesty.length_correlation(totals, lengths, [7, 7, 3, 3]) == pytest.approx(1.0)  # by group id


def test_the_strict_sample_is_the_top_of_groups_with_a_spread_and_bounded():
    totals = [1.0, 1.0, 0.0, 0.0] + [0.0, 0.0, 0.0, 0.0] + [2.0, 0.0, 0.0, None]
    assert honesty.high_scorers(totals, 4) == [0, 1, 8]
    many = [1.0, 0.0] * 100
    picked = honesty.high_scorers(many, 2, limit=32)
    assert len(picked) == 32 and picked[0] == 0 and picked[-1] >= 180  # spread over the step, not its start


def test_solved_and_spread():
    assert honesty.solved_fractions([1.0, 1.0, 0.0, 0.0, 1.0, 0.0], 2) == (pytest.approx(1 / 3), pytest.approx(1 / 3))
    assert honesty.group_spread([1.0, 1.0, 0.0, 2.0], 2) == pytest.approx(0.5)
    assert all(math.isnan(v) for v in honesty.solved_fractions([None, None], 2))


def test_trends_and_the_held_out_comparison_appear_as_the_run_goes():
    trends = honesty.Trends()
    out = {}
    for step in range(1, 21):
        m = {"reward/mean": 0.0 if step <= 10 else 1.0, "reward/std": 0.5, "honesty/length_corr": 0.8,
             "honesty/group_spread": 0.5 if step <= 10 else 0.05}
        if step in (1, 20):
            m["eval/accuracy"] = 0.25
        out[step] = trends.figures(m)
    assert "honesty/reward_gain" not in out[2] and math.isnan(out[1]["honesty/reward_gain"])
    assert out[20]["honesty/reward_gain"] == pytest.approx(2.0)  # rose by 1.0, the start's std 0.5
    assert out[20]["honesty/eval_accuracy_gain"] == 0.0
    assert out[20]["honesty/group_spread_ratio"] == pytest.approx(0.1)
    assert math.isnan(out[19]["honesty/group_spread_ratio"]) and out[5]["honesty/length_corr_trend"] == pytest.approx(0.8)


def test_recomputed_from_samples_the_planted_hack_shows():
    """An import's samples (no decided_by, no strict_pass): the length reward's share of the signs and the
    length correlation rise from the step the planted group starts gaming; the strict check is said missing."""
    rows = pd.concat([pd.DataFrame(samples(step, lens=False)) for step in range(1, STEPS + 1)])
    figures, missing = honesty.from_samples(rows.drop(columns=["answer"]), weights=WEIGHTS)
    by_step = figures.set_index("step")
    assert missing == ["strict"]
    assert by_step.loc[1, "honesty/length/sign_share"] == 0.0
    assert by_step.loc[HACKED, "honesty/length/sign_share"] == pytest.approx(3 / 15)  # the suspect's 3 of 15 decided
    assert by_step.loc[HACKED, "honesty/length_corr"] > by_step.loc[1, "honesty/length_corr"]
    assert by_step["honesty/strict_fail_frac"].isna().all()
    assert math.isfinite(by_step.loc[STEPS, "honesty/length_corr_trend"])


def test_the_trainers_columns_give_the_strict_disagreement():
    rows = pd.DataFrame(samples(HACKED, lens=True))
    figures, missing = honesty.from_samples(rows, weights=WEIGHTS)
    assert missing == []
    # checked: the top of each group (4 honest right answers pass, the suspect's top 2 fail)
    assert figures.loc[0, "honesty/strict_checked"] == G + 1 and figures.loc[0, "honesty/strict_fail_frac"] == 2 / 5
    assert rows.loc[rows["group"] == SUSPECT, "decided_by"].dropna().unique().tolist() == ["length"]


def test_scores_past_float_limits_decide_nothing_rather_than_fail():
    per_reward = {"a": [1e308, -1e308, 0.0, 0.0], "b": [1e308, 1e308, 0.0, 0.0]}
    assert honesty.deciders(per_reward, {"a": 10.0, "b": 10.0}, 4) == [None] * 4  # inf - inf: no sign
    assert math.isnan(honesty.length_correlation([math.inf, 0.0, 1.0], [1, 2, 3], 3))
