"""TRL users' reward code in the trainer, end to end on the tiny model: TRL's own rewards
train unchanged on a conversational task, a reward whose signature cannot take the call is refused
before the model loads, and a reward that fails at step 1 stops the run."""

import json
import textwrap

import pytest

from grpo_lab.rundir import metrics
from grpo_lab.rundir.status import read_status
from trainer_helpers import SMALL, read_table, run_trainer

pytest.importorskip("trl.rewards")
pytest.importorskip("math_verify")

TRL_REWARDS = {"trl.rewards:accuracy_reward": 1.0, "trl.rewards:think_format_reward": 0.5,
               "trl.rewards:get_soft_overlong_punishment": 0.1, "trl.rewards:get_cosine_scaled_reward": 0.1,
               "user_rewards:step_logger": 0.0}
USER_REWARDS = '''
def step_logger(completions, trainer_state, log_metric, **kwargs):
    log_metric("global_step", trainer_state.global_step)   # transformers' TrainerState, as TRL passes it
    return [0.0] * len(completions)

def positional(completion, solution):                     # TRL's call cannot bind this
    return [0.0]

def broken(completions, **kwargs):
    raise RuntimeError("judge server down")
'''


@pytest.fixture
def task_dir(tmp_path):
    """A conversational JSONL task with a `solution` column (TRL's dataset shape) and a user module."""
    rows = [{"prompt": [{"role": "user", "content": f"{a}+{b}="}], "solution": str(a + b)}
            for a in range(4) for b in range(4)]
    (tmp_path / "sums.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "user_rewards.py").write_text(textwrap.dedent(USER_REWARDS))
    return tmp_path


def train(task_dir, name, rewards, *args, params=None):
    config = task_dir / f"{name}.json"
    config.write_text(json.dumps({"rewards": rewards, "reward_params": params or {}}))
    return run_trainer(task_dir / "runs", name, *SMALL, "--sft-steps", "0", "--task", str(task_dir / "sums.jsonl"),
                       "--config", str(config), *args, user_modules=task_dir)


def test_trls_own_rewards_train_unchanged_and_log_their_columns(task_dir):
    params = {"trl.rewards:get_soft_overlong_punishment": {"max_completion_len": 8, "soft_punish_cache": 4},
              "trl.rewards:get_cosine_scaled_reward": {"max_len": 8}}
    result = train(task_dir, "trl", TRL_REWARDS, "--max-steps", "2", params=params)
    assert result.returncode == 0, result.stderr[-3000:]
    run = task_dir / "runs" / "trl"
    assert read_status(run / "status.json")["state"] == "finished"
    scalars = read_table(run, "scalars")
    written = {c for c in scalars.columns if c not in ("step", "time", "wall_s")}
    assert written == metrics.names("grpo", list(TRL_REWARDS), logged=("global_step",))
    assert all((scalars[f"rewards/{fn}/errors"] == 0).all() for fn in TRL_REWARDS)
    assert scalars["rewards/log/global_step"].tolist() == [0.0, 1.0]  # TRL's count of updates already made
    samples = read_table(run, "samples")
    assert {"extra/solution", "extra/gold_parsed", "extra/answer_parsed"} <= set(samples.columns)
    assert (samples["extra/solution"] == samples["answer"]).all()  # the reference, stored with each sample
    assert samples["prompt"].str.fullmatch(r"\d\+\d=").all()  # no chat template: the messages' text
    assert "failed on" not in (run / "train.log").read_text()


def test_a_signature_that_cannot_take_the_call_is_refused_before_the_model_loads(task_dir):
    result = train(task_dir, "bad", {"user_rewards:positional": 1.0})
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: rewards: reward 'user_rewards:positional' cannot take the trainer's call (TRL's): missing a required "
        "argument: 'completion': called with prompts, completions, completion_ids, solution, trainer_state, "
        "log_extra, log_metric; takes (completion, solution)")
    assert not (task_dir / "runs" / "bad").exists()


def test_a_reward_failing_on_every_sample_stops_the_run_at_step_1(task_dir):
    result = train(task_dir, "down", {"user_rewards:broken": 1.0}, "--max-steps", "5")
    assert result.returncode == 3, result.stderr[-3000:]  # stopped by the doctor (grpo_lab/trainer/outcome.py)
    status = read_status(task_dir / "runs" / "down" / "status.json")
    assert status["state"] == "stopped" and status["step"] == 1
    assert status["stop_reason"].startswith("doctor (reward_failed, critical) at step 1: reward 'user_rewards:broken' "
                                            "failed on every completion (16 failures)")
    events = read_table(task_dir / "runs" / "down", "events")
    assert events["kind"].tolist() == ["reward_failed", "reward_unscored"]
    assert "RuntimeError: judge server down" in events["message"][0]
    assert "raised RuntimeError on a dry run" in (task_dir / "runs" / "down" / "train.log").read_text()
