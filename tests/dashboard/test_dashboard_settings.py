"""The one accessor for what the pages derive from a run's config.json."""

from pathlib import Path

from grpo_lab.dashboard.reading.data import settings
from grpo_lab.rundir.reader import RunInfo


def info(config) -> RunInfo:
    return RunInfo("r", Path("r"), {"state": "finished"}, config, [])


def test_values_and_the_clip_range_come_from_the_config():
    s = settings(info({"algo": "ppo", "model": "smollm2", "std_mode": "sample", "epsilon": 0.1,
                       "epsilon_high": 0.28, "group_size": 8, "max_new_tokens": 64, "token_detail_groups": 4}))
    assert (s.algo, s.model, s.std_mode, s.group_size, s.max_new_tokens, s.token_detail_groups) == (
        "ppo", "smollm2", "sample", 8, 64, 4)
    assert s.clip_bounds == (0.9, 1.28)
    assert settings(info({"epsilon": 0.3})).clip_bounds == (0.7, 1.3)  # one epsilon: the chapter's symmetric clip


def test_a_missing_or_hand_edited_config_gets_the_trainers_defaults_never_an_error():
    for config in (None, {}, {"epsilon": "wide", "epsilon_high": [1], "group_size": "eight", "token_detail_groups": True,
                              "advantage_epsilon": "x"}):
        s = settings(info(config))
        assert s.clip_bounds == (0.8, 1.2) and s.group_size is None and s.token_detail_groups == 2
        assert s.advantage_epsilon == 0.0 and s.std_mode == "group"
    assert settings(info({"std_mode": 3})).std_mode == "3"  # shown as written: the page warns it does not know it
    assert settings(info({"advantage_epsilon": 1e-4})).advantage_epsilon == 1e-4  # TRL divides by std + 1e-4
