"""Environment classes as TRL 1.16 documents them, run by TRL and by this trainer.

`MyEnv` is TRL's documented environment class (docs/source/openenv.md, "Environment class
requirements") unchanged, with the `get_reward` method GRPOTrainer's docstring documents
(`environment_factory`: "a `get_reward` method taking no argument and returning a float ... an
additional reward source (with weight 1, logged under the environment's class name)"). What TRL
does with it, and so this trainer: `reset` gets the dataset row's `prompt` and other columns, the
string it returns is appended to the last user message, get_reward scores each rollout and is not
a tool offered to the model."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
import torch

from grpo_lab import rewards
from grpo_lab.tools import environments, load_environment
from grpo_lab.tools.parsing import TagSyntax
from grpo_lab.tools.registry import environment_tools, template_tools
from grpo_lab.trainer import environment_setup, multiturn, tiny
from grpo_lab.trainer.config import ConfigError
from grpo_lab.trainer.decode import Sampling
from grpo_lab.trainer.tasks import Task, render
from trainer_helpers import ROOT, SMALL, read_table, trainer_cmd

USER_ENV = textwrap.dedent('''
    """TRL's documented environment class, with the get_reward TRL's docstring documents."""
    import json
    import os

    ENV_URL = "https://my-env.hf.space"


    class MyClient:  # the documented example's client, here a stand-in that connects to nothing
        def __init__(self, base_url):
            self.base_url = base_url


    def _log(**record):
        if os.environ.get("USER_ENV_LOG"):
            with open(os.environ["USER_ENV_LOG"], "a") as fh:
                fh.write(json.dumps(record) + "\\n")


    class MyEnv:
        def __init__(self):
            self.client = MyClient(base_url=ENV_URL)  # captured from enclosing scope
            self.reward = 0.0

        def reset(self, **kwargs) -> str | None:
            _log(kind="reset", kwargs=kwargs)
            self.reward = 0.0
            return "Initial observation for the model"

        def my_tool(self, arg1: str, arg2: int) -> str:
            """
            Description of what this tool does.

            Args:
                arg1: Description of arg1
                arg2: Description of arg2

            Returns:
                The result message.
            """
            self.reward = 1.0
            return "Tool result"

        def get_reward(self) -> float:
            return self.reward


    def prompt_seen(prompts, completions, **kwargs):
        """A TRL reward that scores nothing and logs the prompts it is handed."""
        _log(kind="reward", prompts=prompts)
        return [0.0] * len(completions)
''')
ROWS = [{"prompt": [{"role": "user", "content": f"What is {a}+{b}?"}], "answer": str(a + b)}
        for a in range(2) for b in range(2)]
OBSERVATION = "Initial observation for the model"


@pytest.fixture(scope="module")
def user_env(tmp_path_factory):
    folder = tmp_path_factory.mktemp("user-env")
    (folder / "user_env.py").write_text(USER_ENV)
    import sys

    sys.path.insert(0, str(folder))
    yield folder
    sys.path.remove(str(folder))
    sys.modules.pop("user_env", None)


# --- the rules, on the class ------------------------------------------------------------------


def test_get_reward_is_a_reward_source_not_a_tool(user_env):
    cls = load_environment("user_env:MyEnv")
    assert sorted(environment_tools(cls())) == ["my_tool"] == environments.tool_names(cls)
    added = environment_setup.run_rewards("user_env:MyEnv", {})
    assert list(added) == ["MyEnv"] and added["MyEnv"][1] == 1.0  # TRL: the class's name, weight 1
    envs = [cls(), cls()]
    envs[1].my_tool("a", 2)
    scores = rewards.score_all(added, ["p", "q"], ["x", "y"], {"environments": envs})
    assert scores.per_reward == {"MyEnv": [0.0, 1.0]} and scores.total == [0.0, 1.0]


def test_the_chat_template_describes_the_tools_without_get_reward(user_env):
    """The template's tool descriptions come from the docstrings; get_reward has none to read
    (the run used to exit 2: DocstringParsingException ... get_reward)."""
    from trl.chat_template_utils import qwen2_5_chat_template

    tokenizer = tiny.build_tokenizer()
    tokenizer.chat_template = qwen2_5_chat_template
    setup = multiturn.ToolSetup(tools={}, environment=load_environment("user_env:MyEnv"))
    text = render(Task("t", [{"prompt_id": 1, "prompt": "2+2="}]), tokenizer, "on",
                  tools=template_tools(setup)).rows[0]["prompt"]
    assert '"name": "my_tool"' in text and "get_reward" not in text


def test_reset_gets_the_rows_prompt_and_columns_and_its_observation_is_appended(user_env):
    cls = load_environment("user_env:MyEnv")
    seen = []
    cls.reset, plain = (lambda self, **kw: seen.append(kw) or OBSERVATION), cls.reset
    try:
        row = {"prompt": "<rendered>", "source_prompt": ROWS[0]["prompt"], "prompt_id": "p-1", "answer": "0"}
        started = environments.start(cls, row, "<rendered>", lambda p: f"[{p[-1]['content']}]")
    finally:
        cls.reset = plain
    assert seen == [{"prompt": ROWS[0]["prompt"], "answer": "0"}]
    assert started.prompt == [{"role": "user", "content": "What is 0+0?" + OBSERVATION}]
    assert started.text == f"[What is 0+0?{OBSERVATION}]"


def test_an_environment_without_get_reward_and_no_rewards_is_refused_in_one_line(user_env, tmp_path):
    (tmp_path / "tool_only.py").write_text("class Tools:\n    def reset(self, **kw): pass\n"
                                           "    def add(self, a: int) -> int:\n        '''Add.\n\n        Args:\n"
                                           "            a: a number\n        '''\n        return a\n")
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(ConfigError, match=r"^rewards: none given, and environment tool_only:Tools has no get_reward"):
            environment_setup.run_rewards("tool_only:Tools", {})
        assert environment_setup.run_rewards("tool_only:Tools", {"correctness": (None, 1.0)}) == {}
    finally:
        sys.path.remove(str(tmp_path))


def test_an_async_get_reward_is_awaited():
    class Judge:
        def reset(self, **kw):
            self.n = len(kw)

        async def get_reward(self) -> float:
            await asyncio.sleep(0)
            return float(self.n)

    name, fn = environments.reward_source(Judge)
    env = Judge()
    env.reset(a=1, b=2)
    assert rewards.score_all({name: (fn, 1.0)}, ["p"], ["c"], {"environments": [env]}).per_reward == {"Judge": [2.0]}


# --- the rollout: a tool call changes the state get_reward reads -----------------------------------


class Counter:
    """A test environment the character model can call (`add 3=`): get_reward reads its state."""

    def reset(self, start, **kwargs):
        self.total = int(start)
        return f" start {start}"

    def add(self, amount: str) -> str:
        """Add to the total.

        Args:
            amount: a whole number
        """
        self.total += int(amount)
        return str(self.total)

    def get_reward(self) -> float:
        return float(self.total)


def test_a_rollout_starts_from_the_observation_and_its_calls_set_the_reward(monkeypatch):
    tokenizer = tiny.build_tokenizer()
    model = tiny.build_model(tokenizer, seed=0).eval()
    contexts = []

    def decode(model_, ids, mask, how, eos_id, pad_id):  # the model 'writes' one call, then stops
        rows = []
        for row, keep in zip(ids, mask.bool()):
            text = tokenizer.decode(row[keep].tolist(), skip_special_tokens=True)
            contexts.append(text)
            out = tokenizer("add 3=" if "add" not in text else "ok", add_special_tokens=False)["input_ids"]
            rows.append(out + ([eos_id] if "add" in text else []))
        width = max(len(r) for r in rows)
        return torch.tensor([r + [pad_id] * (width - len(r)) for r in rows])

    monkeypatch.setattr(multiturn, "decode", decode)
    setup = multiturn.ToolSetup(tools={}, environment=Counter, tags=(TagSyntax("add ", "=", "add"),))
    rows = [{"prompt": "1+2=", "source_prompt": "1+2=", "prompt_id": 1, "start": 10},
            {"prompt": "2+2=", "source_prompt": "2+2=", "prompt_id": 2, "start": 20}]
    r = multiturn.sample_with_tools(model, tokenizer, ["1+2=", "2+2="], Sampling(copies=1, max_new_tokens=30),
                                    torch.device("cpu"), setup, rows)
    prompts = [tokenizer.decode(ids[m.bool()].tolist(), skip_special_tokens=True)
               for ids, m in zip(r.input_ids[:, :r.prompt_len], r.attention_mask[:, :r.prompt_len])]
    assert prompts == ["1+2= start 10", "2+2= start 20"]  # what the model was given
    assert r.completions == ["add 3=13ok", "add 3=23ok"]
    name, fn = environments.reward_source(Counter)
    assert fn(environments=r.environments) == [13.0, 23.0]
    assert environments.prompts_seen(r.environments, ["1+2=", "2+2="]) == ["1+2= start 10", "2+2= start 20"]


# --- the same class, TRL's trainer and this one ---------------------------------------------------------


def trl_run(root: Path, folder: Path) -> dict:
    """A real TRL 1.16 GRPOTrainer with environment_factory=MyEnv and no reward_funcs (the
    environment owns the reward); the tiny model with Qwen2.5's chat template, so TRL can parse tools."""
    import importlib
    import sys

    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    sys.path.insert(0, str(folder))
    user_env = importlib.import_module("user_env")
    tokenizer = tiny.build_tokenizer()
    tokenizer.chat_template = qwen2_5_chat_template
    model = root / "model"
    tiny.build_model(tokenizer, seed=0).save_pretrained(model)
    tokenizer.save_pretrained(model)
    os.environ["USER_ENV_LOG"] = str(root / "trl.log")
    args = GRPOConfig(output_dir=str(root / "out"), per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=8, max_steps=1, logging_steps=1, use_cpu=True, report_to="none",
                      save_strategy="no", log_completions=True, num_completions_to_print=0, disable_tqdm=True, seed=0)
    trainer = GRPOTrainer(model=str(model), processing_class=tokenizer, reward_funcs=[], args=args,
                          train_dataset=Dataset.from_list(ROWS), environment_factory=user_env.MyEnv)
    try:
        trainer.train()
    finally:
        del os.environ["USER_ENV_LOG"]
    import pyarrow.parquet as pq

    table = pq.read_table(root / "out" / "completions" / "completions_00001.parquet").to_pandas()
    log = [json.loads(line) for line in (root / "trl.log").read_text().splitlines()]
    return {"names": trainer.reward_func_names, "weights": trainer.reward_weights.tolist(),
            "tools": [t.__name__ for t in trainer.tools], "resets": [r["kwargs"] for r in log if r["kind"] == "reset"],
            "prompts": [list(p) for p in table["prompt"]], "rewards": table["MyEnv"].tolist()}


def our_run(root: Path, folder: Path) -> dict:
    data = root / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    log = root / "ours.log"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{folder}", "USER_ENV_LOG": str(log)}
    done = subprocess.run(trainer_cmd(root / "runs", "env", *SMALL, "--task", str(data), "--max-steps", "1",
                                      "--prompts-per-step", "2", "--group-size", "2", "--max-new-tokens", "8",
                                      "--environment", "user_env:MyEnv", "--rewards", "user_env:prompt_seen=0"),
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in log.read_text().splitlines()]
    samples = read_table(root / "runs" / "env", "samples")
    return {"resets": [r["kwargs"] for r in records if r["kind"] == "reset"],
            "prompts": [p for r in records if r["kind"] == "reward" for p in r["prompts"]],
            "rewards": samples["rewards/MyEnv"].tolist(), "columns": list(samples.columns), "stderr": done.stderr}


@pytest.fixture(scope="module")
def both(user_env, tmp_path_factory):
    return trl_run(tmp_path_factory.mktemp("trl-env"), user_env), our_run(tmp_path_factory.mktemp("our-env"), user_env)


def test_trl_and_this_trainer_treat_the_documented_class_alike(both):
    trl, ours = both
    # TRL: get_reward is the reward "MyEnv" at weight 1, my_tool the only tool
    assert (trl["names"], trl["weights"], trl["tools"]) == (["MyEnv"], [1.0], ["my_tool"])
    # reset got the row: its prompt (the dataset's messages) and its other columns, in both
    for resets in (trl["resets"], ours["resets"]):
        assert resets and all(r in ROWS for r in resets)  # {"prompt": [the user message], "answer": ...}
    # the observation is appended to the user message: TRL's logged prompts, and the prompts our rewards get
    for prompts in (trl["prompts"], ours["prompts"]):
        assert prompts and all(p[-1]["content"].endswith("?" + OBSERVATION) for p in prompts)
    # get_reward scored every rollout (no tool call from an untrained model: 0.0, as in TRL)
    assert trl["rewards"] == [0.0] * len(trl["rewards"]) and ours["rewards"] == [0.0] * len(ours["rewards"])
    assert "rewards/MyEnv" in ours["columns"] and "DocstringParsingException" not in ours["stderr"]
