"""Options whose good value depends on the model get their default from it, and config.json records
every effective value and where it came from (default, model default, config file, command line)."""

import json

import pytest

from grpo_lab.trainer.config import MODEL_DEFAULTS, SOURCES_KEY, build_parser, load_config
from shared_runs import copy_run, one_pass_run  # noqa: F401 (a fixture: pytest finds it by name)
from trainer_helpers import run_trainer


def test_the_built_in_model_keeps_its_tuned_values():
    cfg = load_config([])
    assert (cfg.lr, cfg.sft_steps, cfg.max_new_tokens) == (2e-3, 60, 4)
    assert cfg.sources["lr"] == "model default (built-in)" and cfg.sources["beta"] == "default"


def test_a_built_in_task_with_defaults_of_its_own_says_so():
    from grpo_lab.trainer.config import TASK_DEFAULTS

    cfg = load_config(["--task", "big_arithmetic", "--max-new-tokens", "12"])
    own = TASK_DEFAULTS[("builtin", "big_arithmetic")]
    assert (cfg.lr, cfg.sft_steps, cfg.max_new_tokens) == (own["lr"], own["sft_steps"], 12)
    assert cfg.sources["lr"] == "task default (big_arithmetic)" and cfg.sources["max_new_tokens"] == "command line"
    assert cfg.reward_params["correctness"] == own["reward_params"]["correctness"]


def test_reward_params_that_are_not_mappings_get_one_line():
    from grpo_lab.trainer.config import ConfigError, from_dict

    with pytest.raises(ConfigError, match=r"^reward_params: correctness: a mapping of parameter names to values, got int$"):
        from_dict({"task": "big_arithmetic", "reward_params": {"correctness": 5}})


@pytest.mark.parametrize("model", ["smollm2", "HuggingFaceTB/SmolLM2-135M-Instruct", "/models/my-llama"])
def test_a_pretrained_model_gets_values_that_train_it_safely(model):
    cfg = load_config(["--model", model])
    assert cfg.lr == MODEL_DEFAULTS["pretrained"]["lr"] <= 1e-5
    assert (cfg.sft_steps, cfg.max_new_tokens) == (0, 128)
    assert cfg.sources["lr"] == "model default (pretrained)" and cfg.sources["model"] == "command line"


def test_given_values_win_and_say_where_they_came_from(tmp_path):
    file = tmp_path / "c.yaml"
    file.write_text("model: smollm2\nlr: 3.0e-5\nmax_new_tokens: 64\n")
    cfg = load_config(["--config", str(file), "--max-new-tokens", "32"])
    assert (cfg.lr, cfg.max_new_tokens, cfg.sft_steps) == (3e-5, 32, 0)
    assert cfg.sources["lr"] == "config file" and cfg.sources["max_new_tokens"] == "command line"
    assert cfg.sources["sft_steps"] == "model default (pretrained)"


def test_help_shows_both_defaults():
    text = "".join(build_parser().format_help().split())  # argparse wraps lines, also at hyphens
    assert "(default:0.002forthebuilt-inmodel,1e-05forapretrainedmodel;in(0,1])" in text
    # every bounded option says its range where it is described
    assert "(default:1.0;in[0.01,100])" in text and "(default:8;in[1,1024])" in text


def test_config_json_records_sources_and_a_resume_keeps_them(tmp_path, one_pass_run):
    copy_run(one_pass_run, tmp_path, "r")  # trained with --max-steps 2 --passes 1 --beta 0 (shared_runs.ONE_PASS_FLAGS)
    saved = json.loads((tmp_path / "r" / "config.json").read_text())
    assert saved["lr"] == 2e-3 and saved[SOURCES_KEY]["lr"] == "model default (built-in)"
    assert saved[SOURCES_KEY]["beta"] == "command line" and saved[SOURCES_KEY]["seed"] == "default"
    assert run_trainer(tmp_path, "r", "--resume", "--max-steps", "3").returncode == 0
    resumed = json.loads((tmp_path / "r" / "config.json").read_text())
    assert resumed["max_steps"] == 3 and resumed[SOURCES_KEY]["max_steps"] == "command line"
    assert resumed[SOURCES_KEY]["lr"] == "model default (built-in)"  # kept from the first attempt
    assert resumed[SOURCES_KEY]["beta"] == "command line"
