"""PPO end to end: a short real run writes the same run directory as GRPO, plus the PPO figures."""

import json

import pytest
import torch

from grpo_lab.rundir.status import read_status
from grpo_lab.trainer.config import ConfigError, from_dict
from grpo_lab.objective.functions import gae, kl_k1
from grpo_lab.trainer.run import train
from shared_runs import PPO_BETA as BETA, PPO_GAMMA, PPO_LAM, ppo_run  # noqa: F401 (ppo_run: a fixture)
from trainer_helpers import always_filled, read_table, registered_metrics


@pytest.fixture
def run_dir(ppo_run):
    """The session's PPO run (shared_runs.PPO_FLAGS: 4 steps, beta 0.1, GAE 0.9 / 0.8, 2 minibatches, 2 passes)."""
    return ppo_run


def test_status_counts_the_value_model(run_dir):
    status = read_status(run_dir / "status.json")
    assert status["state"] == "finished" and status["algo"] == "ppo" and status["step"] == 4
    # the value model is a second transformer body: PPO trains about twice the policy's parameters
    policy_params = 85248  # the built-in tiny Llama (tied embeddings)
    assert status["trained_params"] == 2 * policy_params + 64 + 1
    assert status["peak_memory_mb"] > 0
    assert json.loads((run_dir / "config.json").read_text())["algo"] == "ppo"
    assert (run_dir / "checkpoints" / "step-00000004" / "value.safetensors").is_file()


def test_scalars_have_the_shared_and_the_ppo_metrics(run_dir):
    scalars = read_table(run_dir, "scalars")
    assert scalars["step"].tolist() == [1, 2, 3, 4]
    written = {c for c in scalars.columns if c not in ("step", "time", "wall_s")}
    assert written == registered_metrics("ppo", rewards=["correctness"])  # the registry (and so the doc), both ways
    assert scalars[always_filled(written - {"value/explained_variance"})].notna().all().all()
    assert (scalars["kl/approx"] >= 0).all()  # k3 of pi_old against pi_theta: never negative
    # a step whose returns are all equal (every reward 0, policy still the reference) teaches nothing:
    # advantages 0, value loss 0, explained variance NaN. Otherwise advantages are whitened.
    spread = (scalars["reward/std"] > 0) | (scalars["kl/folded"].abs() > 0)
    assert spread.iloc[-1], "by step 4 the policy has left the reference"
    assert scalars["advantage/mean"].abs().max() < 1e-5
    assert scalars["advantage/std"].tolist() == pytest.approx(spread.astype(float).tolist(), abs=1e-3)
    assert scalars.loc[spread, "value/explained_variance"].notna().all()
    assert (scalars.loc[spread, "value/loss"] > 0).all() and (scalars.loc[~spread, "value/loss"] == 0).all()


def test_tokens_carry_gae_advantages_values_and_the_folded_kl(run_dir):
    tokens = read_table(run_dir, "tokens")
    samples = read_table(run_dir, "samples")
    for column in ("advantage", "value", "return", "token_reward", "logp_old", "logp_ref", "kl"):
        assert column in tokens.columns, column
    checked = 0
    for (step, group, idx), t in tokens.groupby(["step", "group", "sample_idx"], sort=False):
        t = t.sort_values("position")
        n = len(t)
        sample = samples[(samples.step == step) & (samples.group == group) & (samples.sample_idx == idx)]
        assert len(t) == int(sample["length"].iloc[0])
        # r_t = -beta * k1(pi_old, ref) on every token, plus the score on the last token
        kl = kl_k1(torch.tensor(t["logp_old"].values), torch.tensor(t["logp_ref"].values))
        expected = -BETA * kl
        expected[-1] += sample["reward"].iloc[0]
        assert t["token_reward"].tolist() == pytest.approx(expected.tolist(), abs=1e-5)
        # returns are GAE(gamma=0.9, lam=0.8) over those rewards and the logged values
        _, returns = gae(torch.tensor(t["token_reward"].to_numpy())[None], torch.tensor(t["value"].to_numpy())[None],
                         torch.ones(1, n), PPO_GAMMA, PPO_LAM)
        assert t["return"].tolist() == pytest.approx(returns[0].tolist(), abs=1e-5)
        # the samples table's one number per response is the mean of its token advantages
        assert sample["advantage"].iloc[0] == pytest.approx(t["advantage"].mean(), abs=1e-5)
        checked += 1
    assert checked >= 8


def test_one_response_per_prompt_is_allowed_for_ppo_only(tmp_path):
    # in process, to stay quick: PPO's usual form, one response per prompt, no group
    cfg = from_dict({"algo": "ppo", "group_size": 1, "prompts_per_step": 4, "sft_steps": 0, "max_steps": 2,
                     "logging": "scalars", "runs_dir": str(tmp_path), "name": "ppo1", "flush_seconds": 0})
    assert train(cfg) == 0
    scalars = read_table(tmp_path / "ppo1", "scalars")
    assert scalars["groups/frac_zero_std"].tolist() == [1.0, 1.0]  # a "group" of 1 has no spread
    assert scalars["value/loss"].notna().all()
    with pytest.raises(ConfigError, match="^group_size: must be >= 2"):
        from_dict({"algo": "grpo", "group_size": 1, "runs_dir": str(tmp_path), "name": "grpo1"})
