"""A run with an environment whose `reset` returns text (TRL's environment_factory convention: the text
is appended to the prompt's last message): the samples' `prompt` is the text the model started from,
observation included, token for token; and config.json's `rewards` lists the environment's get_reward
source (its class name, weight 1, as TRL names it), which a resumed run reads back."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest

from grpo_lab.trainer import setup, tiny
from grpo_lab.trainer.config import ConfigError, from_dict
from trainer_helpers import ROOT, SMALL, read_table, trainer_cmd

ENV_MODULE = textwrap.dedent('''
    """An environment whose reset returns a different observation for every rollout, and a spy on the
    trainer's decoding loop that writes down the prompt tokens of each rollout's first round: what the
    model saw."""
    import itertools
    import json
    import os

    import grpo_lab.trainer.multiturn as _multiturn

    _resets = itertools.count()
    _first_round = [False]


    class Quiz:
        def reset(self, **row):
            self.calls = 0
            return f" (board {next(_resets)})"

        def peek(self, square: str) -> str:
            """Look at a square.

            Args:
                square: its name
            """
            self.calls += 1
            return "empty"

        def get_reward(self) -> float:
            return float(self.calls)


    def nothing(prompts, completions, **kwargs):
        return [0.0] * len(completions)


    _sample, _decode = _multiturn.sample_with_tools, _multiturn.decode


    def _sample_spy(*args, **kwargs):
        _first_round[0] = True
        return _sample(*args, **kwargs)


    def _decode_spy(model, ids, mask, *args, **kwargs):
        if _first_round[0]:
            _first_round[0] = False
            with open(os.environ["SEEN_LOG"], "a") as fh:
                fh.write(json.dumps([row[m.bool()].tolist() for row, m in zip(ids, mask)]) + "\\n")
        return _decode(model, ids, mask, *args, **kwargs)


    _multiturn.sample_with_tools, _multiturn.decode = _sample_spy, _decode_spy
''')
ROWS = [{"prompt": [{"role": "user", "content": f"What is {a}+{b}?"}], "answer": str(a + b)}
        for a in range(3) for b in range(3)]


@pytest.fixture(scope="module")
def env_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("env-observation")
    (root / "quiz_env.py").write_text(ENV_MODULE)
    (root / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{root}", "SEEN_LOG": str(root / "seen.jsonl")}

    def train(*args: str) -> None:
        done = subprocess.run(trainer_cmd(root / "runs", "env", *SMALL, "--task", str(root / "rows.jsonl"),
                                          "--max-new-tokens", "8", "--environment", "quiz_env:Quiz",
                                          "--rewards", "quiz_env:nothing=0", *args),
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]

    train("--max-steps", "1")
    config = json.loads((root / "runs" / "env" / "config.json").read_text())
    train("--max-steps", "2", "--resume")  # config.json lists Quiz among the rewards: read back, not refused
    seen = [json.loads(line) for line in (root / "seen.jsonl").read_text().splitlines()]
    return {"run": root / "runs" / "env", "config": config, "seen": seen}


def test_the_samples_prompt_is_what_the_model_saw_observation_included(env_run):
    samples = read_table(env_run["run"], "samples").sort_values(["step", "group", "sample_idx"])
    tokenizer = tiny.build_tokenizer()
    assert sorted(samples["step"].unique()) == [1, 2] and len(env_run["seen"]) == 2  # one rollout a step
    for (step, rows), seen in zip(samples.groupby("step"), env_run["seen"]):
        ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in rows["prompt"]]
        matched = sum(mine == theirs for mine, theirs in zip(ids, seen))
        assert (matched, len(seen)) == (16, 16), f"step {step}: {matched} of {len(seen)} prompts are what the model saw"
        assert rows["prompt"].str.contains(r"\? \(board \d+\)").all()  # appended to the user's message, as in TRL
        assert rows["prompt"].nunique() == 16  # every rollout its own observation


def test_config_lists_the_environments_reward_source(env_run):
    assert env_run["config"]["rewards"] == {"quiz_env:nothing": 0.0, "Quiz": 1.0}
    samples = read_table(env_run["run"], "samples")
    assert {"rewards/quiz_env:nothing", "rewards/Quiz"} <= set(samples.columns)


def test_a_listed_environment_source_is_built_from_the_class_and_keeps_trls_weight(tmp_path, monkeypatch):
    (tmp_path / "quiz_env_unit.py").write_text("class Quiz:\n    def reset(self, **row): pass\n"
                                               "    def get_reward(self): return 1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    listed = {"rewards": {"length": 1.0, "Quiz": 1.0}, "environment": "quiz_env_unit:Quiz"}  # as config.json has it
    built = setup.build_rewards(from_dict(listed))
    assert {n: w for n, (_, w) in built.items()} == {"length": 1.0, "Quiz": 1.0}
    with pytest.raises(ConfigError, match=r"^rewards: Quiz is the environment's get_reward, which scores at weight 1"):
        setup.build_rewards(from_dict({"rewards": {"Quiz": 2.0}, "environment": "quiz_env_unit:Quiz"}))
    with pytest.raises(ConfigError, match=r"^rewards: unknown reward 'Quiz'"):  # no environment: an unknown name
        setup.build_rewards(from_dict({"rewards": {"Quiz": 1.0}}))
