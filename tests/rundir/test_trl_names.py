"""One metric, one name, whoever wrote it: TRL names a factory's reward after
the function it returns (`rewards/soft_overlong_punishment_reward/mean`), this trainer after the
spec (`rewards/trl.rewards:get_soft_overlong_punishment/mean`); a reward's `log_metric` figure is
`rewards/log/<name>` here, and TRL logs it under the bare name. The TRL side is a real TRL 1.16 run,
live (the callback) and imported; ours is what the trainer's scoring writes. Compare matches them."""

from __future__ import annotations

import importlib

import pytest

from grpo_lab import rewards
from grpo_lab.dashboard.views.compare.compare_view import reward_name
from grpo_lab.rundir.importers import names
from grpo_lab.rundir.trl import RunDirCallback
from trainer_helpers import read_table
from trl_helpers import run_trl

cli = importlib.import_module("grpo_lab.rundir.import")
FACTORY = "trl.rewards:get_soft_overlong_punishment"
PARAMS = {"max_completion_len": 4, "soft_punish_cache": 2}


def chars(completions, log_metric, **kwargs):
    """A user reward that logs a figure of its own with TRL's log_metric."""
    log_metric("mean_chars", sum(len(c) for c in completions) / len(completions))
    return [len(c) / 10 for c in completions]


@pytest.fixture(scope="module")
def trl_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("trl-names")
    runs = root / "runs"
    run_trl(root, "out", callbacks=[RunDirCallback(runs / "live")], reward_funcs=(rewards.build(FACTORY, **PARAMS), chars),
            max_steps=2, eval_strategy="no", save_strategy="steps", save_steps=2)
    assert cli.main([str(root / "out"), "--name", "imported", "--runs-dir", str(runs)]) == 0
    return runs


def ours() -> set[str]:
    """The scalar names this trainer writes for the same two rewards (its scoring's metrics)."""
    fns = {FACTORY: (rewards.build(FACTORY, **PARAMS), 1.0), "tests.test_trl_names:chars": (chars, 1.0)}
    scores = rewards.score_all(fns, ["p", "q"], ["1", "22"], {}, completion_ids=[[1], [1, 2, 3, 4]])
    return set(scores.metrics())


@pytest.mark.parametrize("run", ["live", "imported"])
def test_trls_names_and_ours_are_one_metric_in_compare(trl_runs, run):
    theirs = set(read_table(trl_runs / run, "scalars").columns)
    mine = ours()
    assert {"rewards/soft_overlong_punishment_reward/mean", "rewards/log/mean_chars"} <= theirs
    assert {f"rewards/{FACTORY}/mean", "rewards/log/mean_chars"} <= mine
    assert not any(c.startswith("trl/mean_chars") for c in theirs)
    shared = {reward_name(c) for c in theirs} & {reward_name(c) for c in mine}
    assert {"rewards/soft_overlong_punishment_reward/mean", "rewards/soft_overlong_punishment_reward/std",
            "rewards/chars/mean", "rewards/log/mean_chars", "reward/mean"} <= shared


def test_the_name_rules():
    assert names.reward_function_name("trl.rewards:get_cosine_scaled_reward") == "cosine_scaled_reward"
    assert reward_name("rewards/trl.rewards:get_cosine_scaled_reward/mean") == "rewards/cosine_scaled_reward/mean"
    assert names.metric_name("num_tokens") == "trl/num_tokens"  # TRL's own figure stays TRL's
    assert names.metric_name("eval_reward") == "trl/eval_reward"
    assert names.comparable("trl/mean_chars") == "rewards/log/mean_chars"  # an older import's name
