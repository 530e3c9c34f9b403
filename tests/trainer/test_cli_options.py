"""The trainer's command line: every option of --help parses, booleans as flags, usage errors in one line.
A bare flag end to end, through a real run: tests/trainer/test_train_variants.py trains its dynamic run with
`--dynamic-sampling` alone (test_the_bare_dynamic_sampling_flag_runs)."""

from __future__ import annotations

import dataclasses

import pytest

from grpo_lab.trainer.config import Config, ConfigError, build_parser, load_config
from trainer_helpers import run_trainer

BOOLEANS = [f.name for f in dataclasses.fields(Config) if f.type in (bool, "bool")]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def test_every_option_in_help_parses_its_default():
    parser = build_parser()
    help_text = parser.format_help()
    for f in dataclasses.fields(Config):
        assert _flag(f.name) in help_text
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        if f.name in BOOLEANS:
            args = [_flag(f.name)]
        elif isinstance(default, dict):
            args = [_flag(f.name), ",".join(f"{k}={v}" for k, v in default.items()) or "x=1"]
        else:
            args = [_flag(f.name), str(default)]
        parsed = vars(parser.parse_args(args))
        assert parsed[f.name] is not None, f.name


@pytest.mark.parametrize("name", [n for n in BOOLEANS if n != "resume"])
def test_a_boolean_flag_alone_is_true_and_no_flag_is_false(name):
    assert getattr(load_config([_flag(name), "--name", "x"]), name) is True
    assert getattr(load_config(["--no-" + _flag(name)[2:], "--name", "x"]), name) is False
    assert getattr(load_config([_flag(name), "false", "--name", "x"]), name) is False  # the dashboard's form


@pytest.mark.parametrize("argv, expected", [
    (["--dynamic-samplin"], "did you mean --dynamic-sampling?"),
    (["--max-step", "3"], "did you mean --max-steps?"),  # no silent prefix match
    (["--lr"], "argument --lr: expected one argument"),
    (["--mask-truncated", "maybe"], "mask_truncated: must be true or false"),
])
def test_usage_errors_are_one_line_naming_the_option(argv, expected):
    with pytest.raises(ConfigError) as caught:
        load_config(argv)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_a_misspelt_option_exits_2_with_one_line(tmp_path):
    result = run_trainer(tmp_path, "r", "--dynamic-samplin")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: unrecognized arguments: --dynamic-samplin; did you mean --dynamic-sampling? (see --help)"]
    assert not (tmp_path / "r").exists()


def test_reward_params_on_the_command_line_are_json_and_anything_else_is_one_line():
    """--reward-params was read as a name=weight list: '{"length": {"max_len": 0}}' became a reward parameter
    named by the whole text, and the length reward ran with its defaults."""
    from grpo_lab.trainer.config import ConfigError, load_config

    cfg = load_config(["--rewards", "correctness,length", "--reward-params", '{"length": {"max_len": 2}}'])
    assert cfg.reward_params == {"length": {"max_len": 2}}
    for bad, says in (("length=3", "not valid JSON"), ('{"length": 3}', "a JSON object of reward names"),
                      ("[" * 5000 + "]" * 5000, "nested deeper")):
        with pytest.raises(ConfigError, match=says):
            load_config(["--reward-params", bad])
