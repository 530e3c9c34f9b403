"""Values from files (a YAML or JSON --config, a sweep, a queued entry, a resumed config.json) are typed
as the command line's are: a null, a boolean where a number goes or a value of another type is one line
naming the field and the type allowed, and a file that expands or nests past its bounds is refused."""

from __future__ import annotations

import json

import pytest

from grpo_lab.trainer.config import ConfigError, from_dict, load_config


@pytest.mark.parametrize("text, field, allowed", [
    ("group_size: null", "group_size", "an integer"),
    ("max_steps: null", "max_steps", "an integer"),
    ("model: null", "model", "text"),
    ("seed: null", "seed", "an integer"),
    ("columns: null", "columns", "a mapping"),
    ("reward_params: null", "reward_params", "a mapping"),
    ("beta: null", "beta", "a number"),
    ("epsilon: null", "epsilon", "a number"),
    ("passes: null", "passes", "an integer"),
    ("temperature: null", "temperature", "a number"),
    ("checkpoint_every: null", "checkpoint_every", "an integer"),
    ("max_steps: true", "max_steps", "an integer"),
    ("mismatch_cap: true", "mismatch_cap", "a number"),
    ("mismatch_cap: null", "mismatch_cap", "a number"),
    ("mismatch_cap_min: null", "mismatch_cap_min", "a number"),
    ("model: [a, b]", "model", "text"),
    ("resume: 3", "resume", "true or false"),
    ("rewards: {correctness: true}", "rewards", "number"),
])
def test_a_config_file_value_of_the_wrong_type_is_one_line_naming_the_field(tmp_path, text, field, allowed):
    path = tmp_path / "c.yaml"
    path.write_text(text + "\n")
    with pytest.raises(ConfigError) as caught:
        load_config(["--config", str(path), "--runs-dir", str(tmp_path / "runs"), "--name", "r"])
    line = str(caught.value)
    assert line.startswith(f"{field}:") and allowed in line and "\n" not in line, line
    assert not (tmp_path / "runs").exists()


def test_json_null_and_the_sweep_rule_for_null_are_the_trainers():
    from grpo_lab.trainer.config import typed_value

    path_value = json.loads('{"mismatch_cap": null}')
    with pytest.raises(ConfigError, match="^mismatch_cap: must be a number"):
        from_dict(path_value)
    # the one rule every reader shares: an optional option takes null (unset), another does not
    assert typed_value("lr", None) is None and typed_value("max_new_tokens", None) is None
    with pytest.raises(ConfigError, match="^beta: must be a number, got null"):
        typed_value("beta", None)


def test_an_alias_bomb_and_a_deep_reward_params_are_refused(tmp_path):
    bomb = tmp_path / "bomb.yaml"  # 8 lines, 10^6 leaves once expanded, all inside one known option
    lines = ["reward_params:", "  length:", "    a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for prev, name in zip("abcde", "bcdef"):
        lines.append(f"    {name}: &{name} [{', '.join(['*' + prev] * 10)}]")
    bomb.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match="^config: .*(aliases|values)"):
        load_config(["--config", str(bomb)])
    deep = tmp_path / "deep.json"
    deep.write_text(json.dumps({"reward_params": {"length": eval("{'x': " * 78 + "1" + "}" * 78)}}))
    with pytest.raises(ConfigError, match="^reward_params: .*deep"):
        load_config(["--config", str(deep)])


def test_an_error_echoing_a_long_value_is_cut():
    with pytest.raises(ConfigError) as caught:
        from_dict({"name": "x" * 100_000})
    assert len(str(caught.value)) < 400 and "100,000 characters" in str(caught.value)


def test_the_sweep_command_refuses_a_null_as_the_trainer_does(tmp_path):
    """It dropped the null (the option took its default) where the trainer crashed on it."""
    from grpo_lab.launching.sweep import base_values
    from grpo_lab.launching.sweep_grid import SweepError

    path = tmp_path / "c.yaml"
    path.write_text("beta: null\n")
    with pytest.raises(SweepError, match="^beta: must be a number, got null$"):
        base_values(["--config", str(path)])
    path.write_text("lr: null\nmax_steps: 3\n")  # lr is optional: null is its model's default, for both
    assert base_values(["--config", str(path)]) == {"lr": None, "max_steps": 3}
