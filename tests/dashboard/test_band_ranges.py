"""Compare's band across seeds stays where the metric can go: a total reward of a 0-1 reward (correctness)
with 2 seeds no longer reaches below 0; a reward with no known range is left as the t-interval gives it."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from grpo_lab.dashboard.reading import variants_data
from grpo_lab.rewards.registry import reward_range


def long_frame() -> pd.DataFrame:
    # two seeds a variant at step 1: rewards 0.0 and 0.4 (mean 0.2, sd 0.28: the 95% t-interval is +-2.54)
    return pd.DataFrame({"variant": ["a", "a", "b", "b"], "run": ["a0", "a1", "b0", "b1"], "step": [1, 1, 1, 1],
                         "x": [1.0] * 4, "reward/mean": [0.0, 0.4, 0.0, 0.4]})


def test_a_0_1_rewards_band_is_cut_at_0_and_1_and_an_unknown_one_is_not():
    ranges = (("a", *reward_range({"correctness": 1.0})), ("b", *reward_range({"my.mod:fn": 1.0})))
    band = variants_data.band_all(long_frame(), "reward/mean", ranges).set_index("variant")
    assert band.loc["a", "low"] == 0.0 and band.loc["a", "high"] == 1.0
    assert band.loc["b", "low"] == pytest.approx(0.2 - 2.54, abs=0.01)  # nothing known: the t-interval's own


def test_a_variants_range_comes_from_its_runs_rewards_when_they_agree():
    run = lambda rewards: SimpleNamespace(config={"rewards": rewards})  # noqa: E731
    assert variants_data._reward_range([run({"correctness": 1.0, "format": 0.5})] * 2) == (0.0, 1.5)
    assert variants_data._reward_range([run({"correctness": 1.0}), run({"format": 1.0})]) == (None, None)
    assert variants_data._reward_range([run("correctness")]) == (None, None)
