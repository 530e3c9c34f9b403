"""The last line of defence: a non-finite reward, advantage or loss never reaches an optimizer
step or a checkpoint. The step is skipped, still logs, and a critical finding says why; GRPO and PPO."""

from __future__ import annotations

import textwrap

import pytest
import torch
from safetensors.torch import load_file

from grpo_lab.rundir.status import read_status
from grpo_lab.trainer.doctor import Doctor
from grpo_lab.trainer.updates import not_finite
from trainer_helpers import SMALL, read_table, run_trainer

# A user's reward that scores one completion of every batch 1e39: a finite Python float, and inf once
# the trainer holds rewards as float32; the group's advantages are then NaN. Its inf and NaN scores
# are refused by the reward contract (no score, a failure line) and must not matter either.
USER_REWARDS = '''
def huge(completions, **kwargs):
    special = [1e39, float("nan"), float("inf")]
    return [special[i] if i < len(special) else float(len(c) % 3) for i, c in enumerate(completions)]


def both_signs(completions, **kwargs):
    """1e39 and -1e39 (inf and -inf in float32, so the step's reward/mean is NaN) on 3 of 12 samples."""
    return [(1e39 if i % 8 == 0 else -1e39) if i % 4 == 0 else float(len(c) % 3) for i, c in enumerate(completions)]
'''


def test_not_finite_names_what_and_how_many():
    assert not_finite("advantage", torch.tensor([0.5, -0.5])) is None
    assert not_finite("reward", torch.tensor([1.0, float("inf"), float("-inf")])) == \
        "reward: 2 of 3 values not finite (-inf, inf)"
    assert not_finite("loss", torch.tensor(float("nan"))) == "loss: 1 of 1 values not finite (nan)"


def test_a_skipped_update_is_a_critical_finding_and_not_broken_weights():
    doctor = Doctor(lr=1e-3, max_grad_norm=1.0, pretrained=False, vocab_size=20, trained_params=1)
    found = doctor.check(1, {"reward/mean": float("inf"), "loss/total": float("nan")},
                         skipped="reward: 1 of 16 values not finite (inf)")
    assert [(f.kind, f.severity) for f in found] == [("update_skipped", "critical")]
    assert "reward: 1 of 16 values not finite (inf)" in found[0].message
    # the same NaN loss without a skip is what it always was: weights likely broken
    found = Doctor(lr=1e-3, max_grad_norm=1.0, pretrained=False, vocab_size=20,
                   trained_params=1).check(1, {"loss/total": float("nan")})
    assert [f.kind for f in found] == ["non_finite"]


def checkpoint_tensors(folder) -> dict[str, torch.Tensor]:
    """Every floating-point tensor a checkpoint folder holds (weights, and optimizer state if any)."""
    out = {}
    for path in sorted(folder.iterdir()):
        if path.suffix == ".safetensors":
            out.update({f"{path.name}:{k}": v for k, v in load_file(path).items()})
        elif path.name == "optimizer.pt":
            def walk(x, name):
                if isinstance(x, torch.Tensor):
                    out[name] = x
                elif isinstance(x, dict):
                    for k, v in x.items():
                        walk(v, f"{name}/{k}")
                elif isinstance(x, (list, tuple)):
                    for i, v in enumerate(x):
                        walk(v, f"{name}/{i}")
            walk(torch.load(path, weights_only=True), path.name)
    return {k: v for k, v in out.items() if v.is_floating_point()}


@pytest.fixture(scope="module")
def user_module(tmp_path_factory):
    folder = tmp_path_factory.mktemp("user")
    (folder / "user_rewards.py").write_text(textwrap.dedent(USER_REWARDS))
    return folder


def train(folder, name, *args):
    return run_trainer(folder / "runs", name, *SMALL, "--sft-steps", "5", "--max-steps", "2", "--beta", "0.04",
                       "--rewards", "user_rewards:huge", *args, user_modules=folder)


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_an_inf_reward_never_reaches_the_weights(user_module, algo):
    result = train(user_module, algo, "--algo", algo, "--stop-on", "none", "--passes", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    run = user_module / "runs" / algo
    assert read_status(run / "status.json")["state"] == "finished"

    # every step still logs, with the reward it got (inf) and no loss, since none was minimised
    scalars = read_table(run, "scalars")
    assert scalars["step"].tolist() == [1, 2]
    assert (scalars["reward/max"] == float("inf")).all()
    assert "loss/total" not in scalars or scalars["loss/total"].isna().all()
    events = read_table(run, "events")
    skipped = events[events["kind"] == "update_skipped"]
    assert skipped["severity"].tolist() == ["critical"] and skipped["step"].tolist() == [1]
    assert "reward: " in skipped["message"].iloc[0] and "not finite (inf)" in skipped["message"].iloc[0]
    assert "non_finite" not in events["kind"].tolist()  # the weights were never broken
    samples = read_table(run, "samples")
    assert samples["ratio_max"].isna().all() and samples["clipped_tokens"].isna().all()

    # no optimizer step was taken: the final checkpoint is finite, and holds the weights RL started from
    final = sorted((run / "checkpoints").glob("step-*"))[-1]
    tensors = checkpoint_tensors(final)
    assert tensors and all(torch.isfinite(t).all() for t in tensors.values())
    initial = load_file(run / "checkpoints" / "initial" / "model.safetensors")
    trained = load_file(final / "model.safetensors")
    assert all(torch.equal(initial[k], trained[k]) for k in initial)


def test_the_default_stop_on_stops_the_run_at_the_skipped_step(user_module):
    result = train(user_module, "stops")
    assert result.returncode == 3, result.stderr[-3000:]  # the doctor stopped it (trainer/outcome.py)
    assert "by --stop-on critical" in result.stderr.strip().splitlines()[-1]
    status = read_status(user_module / "runs" / "stops" / "status.json")
    assert status["state"] == "stopped" and status["step"] == 1
    assert "update_skipped" in status["stop_reason"]


def test_a_step_with_non_finite_rewards_stops_saying_so_not_that_nothing_was_scored(user_module):
    """9 of 12 completions scored, 3 past float32 with both signs: reward/mean is NaN, as when nothing is
    scored, but the stop line must say what happened (before: "no completion of the step was scored")."""
    result = train(user_module, "signs", "--rewards", "user_rewards:both_signs", "--prompts-per-step", "3")
    assert result.returncode == 3, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert "by --stop-on critical" in last and "reward: 3 of 12 values not finite (-inf, inf)" in last, last
    assert "no completion of the step was scored" not in result.stderr
    run = user_module / "runs" / "signs"
    assert read_table(run, "scalars")["reward/mean"].isna().all()
    assert read_table(run, "events")["kind"].tolist() == ["update_skipped"]
    assert "update_skipped" in read_status(run / "status.json")["stop_reason"]
