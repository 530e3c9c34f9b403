"""verl's and OpenRLHF's tracker names for metrics, mapped to ours (docs/run-directory.md) where they mean the same.

One registry, as names.py is for TRL: the tracker importer, docs/trl-and-verl.md's table and the tests read
these dicts. A name with no entry is kept under its own name (verl's `actor/ppo_kl`, `rollout_corr/kl`),
with OpenRLHF's `train/` prefix as it logged it; a name the lab registers (a run this lab reported) is ours.
"""

from __future__ import annotations

# verl (trainer.logger=tensorboard / wandb; verl/trainer/ppo/metric_utils.py, rollout_corr_helper.py) -> ours
VERL = {
    "critic/score/mean": "reward/mean",  # the reward function's score per sequence (before a KL penalty)
    "critic/score/max": "reward/max",
    "critic/score/min": "reward/min",
    "critic/advantages/mean": "advantage/mean",  # over response tokens, not per completion as ours
    "critic/advantages/max": "advantage/max",
    "critic/advantages/min": "advantage/min",
    "response_length/mean": "completion/length_mean",
    "response_length/max": "completion/length_max",
    "response_length/clip_ratio": "completion/truncated_frac",  # responses that reached max length
    "actor/pg_loss": "loss/policy",
    "actor/grad_norm": "grad/norm",
    "actor/entropy": "entropy/mean",
    "actor/kl_loss": "kl/mean",  # use_kl_loss: KL to the reference, by its kl_loss_type (low_var_kl: k3)
    "actor/lr": "lr",
    "timing_s/step": "time/step_s",
    "timing_s/gen": "time/generation_s",
    # train/inference mismatch (algorithm.rollout_correction): the sampler (vLLM, SGLang) against the
    # trainer's forward of pi_old, over response tokens
    "rollout_corr/k3_kl": "mismatch/kl",  # mean of w - 1 - log w, w = pi_old / pi_rollout: ours exactly
    "rollout_corr/rollout_is_mean": "mismatch/weight_mean",  # the IS weights applied (after truncation)
    "rollout_corr/rollout_rs_masked_fraction": "mismatch/masked_frac",  # tokens rejection sampling left out
}

# OpenRLHF (--use_tensorboard DIR / --use_wandb; logged as train/<key>, openrlhf/utils/logging_utils.py) -> ours
OPENRLHF = {
    "train/reward": "reward/mean",
    "train/policy_loss": "loss/policy",
    "train/actor_grad_norm": "grad/norm",
    "train/actor_lr": "lr",
    "train/response_length": "completion/length_mean",
    "train/ppo_clip_ratio": "clip/total",  # tokens whose clipped term was the one taken
    "train/kl": "kl/mean",  # to the reference, by --kl_estimator; in the loss or folded into the reward
}

FRAMEWORKS = {"verl": VERL, "openrlhf": OPENRLHF}


def framework(names: set[str]) -> str:
    """Which trainer logged these names: verl (actor/, critic/), openrlhf (train/), else grpo-lab.

    >>> framework({"actor/pg_loss", "rollout_corr/k3_kl"}), framework({"train/reward"}), framework({"reward/mean"})
    ('verl', 'openrlhf', 'grpo-lab')
    """
    if any(n.startswith(("actor/", "critic/", "rollout_corr/", "timing_s/")) for n in names):
        return "verl"
    if any(n.startswith("train/") for n in names):
        return "openrlhf"
    return "grpo-lab"


def ours(name: str, kind: str) -> str:
    """The name a scalar of trainer `kind` gets here: mapped, else its own.

    >>> ours("rollout_corr/k3_kl", "verl"), ours("rollout_corr/kl", "verl"), ours("train/kl", "openrlhf")
    ('mismatch/kl', 'rollout_corr/kl', 'kl/mean')
    """
    return FRAMEWORKS.get(kind, {}).get(name, name)
