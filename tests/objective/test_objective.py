"""The chapter's worked numbers and the objective's edge cases, through the trainer's own functions."""

import math

import pytest
import torch

from grpo_lab.objective.functions import (
    LossSettings,
    aggregate,
    clipped_surrogate,
    exact_kl,
    group_advantages,
    grpo_loss,
    kl_k1,
    kl_k3,
    policy_ratio,
)


def test_chapter_group_advantage_example():
    out = group_advantages(torch.tensor([[1.0, 3.0, 2.0, 6.0]]))
    assert out.mean.item() == pytest.approx(3.0)
    assert out.std.item() == pytest.approx(1.8708, abs=1e-4)  # population std: divide by G
    assert out.advantages[0].tolist() == pytest.approx([-1.069, 0.0, -0.5345, 1.6036], abs=1e-3)
    assert [round(a, 2) for a in out.advantages[0].tolist()] == [-1.07, 0.0, -0.53, 1.6]


def test_sample_std_and_centre_only_options():
    rewards = torch.tensor([[1.0, 3.0, 2.0, 6.0]])
    sample = group_advantages(rewards, "sample")
    assert sample.std.item() == pytest.approx(math.sqrt(14 / 3))
    assert sample.advantages[0, 3].item() == pytest.approx(3 / math.sqrt(14 / 3), abs=1e-5)
    none = group_advantages(rewards, "none")
    assert none.advantages[0].tolist() == pytest.approx([-2.0, 0.0, -1.0, 3.0])


@pytest.mark.parametrize("mode", ["group", "sample", "none"])
def test_equal_rewards_give_zero_advantage_not_nan(mode):
    out = group_advantages(torch.tensor([[0.7, 0.7, 0.7, 0.7], [1.0, 0.0, 1.0, 0.0]]), mode)
    assert not torch.isnan(out.advantages).any()
    assert out.advantages[0].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert out.zero_std.tolist() == [True, False]


def test_unscored_rewards_are_left_out_and_get_zero():
    out = group_advantages(torch.tensor([[1.0, float("nan"), 3.0, 2.0, 6.0]]))
    assert out.mean.item() == pytest.approx(3.0)
    adv = out.advantages[0].tolist()
    assert adv[1] == 0.0
    assert [adv[0], adv[2], adv[3], adv[4]] == pytest.approx([-1.069, 0.0, -0.5345, 1.6036], abs=1e-3)


def test_all_rewards_none_or_one_scored_is_zero_std():
    nan = float("nan")
    out = group_advantages(torch.tensor([[nan, nan, nan], [nan, 1.0, nan]]))
    assert out.zero_std.tolist() == [True, True]
    assert out.advantages.abs().sum().item() == 0.0


def test_shifting_rewards_leaves_advantages_unchanged():
    base = group_advantages(torch.tensor([[1.0, 3.0, 2.0, 6.0]])).advantages
    shifted = group_advantages(torch.tensor([[101.0, 103.0, 102.0, 106.0]])).advantages
    assert torch.allclose(base, shifted, atol=1e-5)


def test_chapter_clip_example():
    ratio = policy_ratio(torch.log(torch.tensor(0.6)), torch.log(torch.tensor(0.4)))
    assert ratio.item() == pytest.approx(1.5)
    surr = clipped_surrogate(ratio, torch.tensor(1.0), 0.2)
    assert surr.objective.item() == pytest.approx(1.2)
    assert surr.clipped_high.item() and not surr.clipped_low.item()


def test_negative_advantage_clips_at_one_minus_eps():
    # A < 0: min(r*A, clip(r)*A) with r = 0.5 -> clip(0.5) = 0.8 -> objective -0.8
    surr = clipped_surrogate(torch.tensor(0.5), torch.tensor(-1.0), 0.2)
    assert surr.objective.item() == pytest.approx(-0.8)
    assert surr.clipped_low.item()
    # A < 0 and r > 1 + eps is not clipped: the pessimistic bound keeps the full penalty
    surr = clipped_surrogate(torch.tensor(1.5), torch.tensor(-1.0), 0.2)
    assert surr.objective.item() == pytest.approx(-1.5)
    assert not surr.clipped_low.item() and not surr.clipped_high.item()


def test_separate_upper_epsilon():
    surr = clipped_surrogate(torch.tensor(1.5), torch.tensor(1.0), 0.2, eps_high=0.28)
    assert surr.objective.item() == pytest.approx(1.28)


def test_chapter_kl_example_and_asymmetry():
    p, q = torch.tensor([0.5, 0.5]), torch.tensor([0.25, 0.75])
    assert exact_kl(p, q).item() == pytest.approx(0.1438, abs=1e-4)
    assert exact_kl(q, p).item() == pytest.approx(0.1308, abs=1e-4)
    assert round(exact_kl(p, q).item(), 3) == 0.144 and round(exact_kl(q, p).item(), 3) == 0.131


def test_k3_is_nonnegative_and_unbiased_on_samples():
    torch.manual_seed(0)
    pi, ref = torch.tensor([0.5, 0.5]), torch.tensor([0.25, 0.75])
    tokens = torch.multinomial(pi, 200_000, replacement=True)
    logp, ref_logp = torch.log(pi)[tokens], torch.log(ref)[tokens]
    k3 = kl_k3(logp, ref_logp)
    assert (k3 >= 0).all()
    assert k3.mean().item() == pytest.approx(exact_kl(pi, ref).item(), abs=3e-3)
    assert kl_k1(logp, ref_logp).mean().item() == pytest.approx(exact_kl(pi, ref).item(), abs=3e-3)
    assert (kl_k1(logp, ref_logp) < 0).any()  # k1 is unbiased but not per-token non-negative


def test_sequence_aggregation_weighs_each_response_equally():
    per_token = torch.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]])
    assert aggregate(per_token, mask, "sequence").item() == pytest.approx(0.5)
    assert aggregate(per_token, mask, "token").item() == pytest.approx(0.8)


def _grad_of_logp(advantage: float, logp_new: float, logp_old: float, eps: float = 0.2) -> float:
    logp = torch.tensor([[logp_new]], requires_grad=True)
    out = grpo_loss(logp, torch.tensor([[logp_old]]), None, torch.tensor([advantage]), torch.ones(1, 1),
                    LossSettings(epsilon=eps))
    out.loss.backward()
    return logp.grad.item()


def test_gradient_direction_follows_advantage():
    # a gradient-descent step moves logp by -grad: positive A raises it, negative A lowers it
    assert -_grad_of_logp(+1.0, -1.0, -1.0) > 0
    assert -_grad_of_logp(-1.0, -1.0, -1.0) < 0


def test_clipped_token_has_zero_gradient():
    assert _grad_of_logp(+1.0, math.log(0.6), math.log(0.4)) == 0.0  # r = 1.5 > 1.2, A > 0
    assert _grad_of_logp(-1.0, math.log(0.2), math.log(0.4)) == 0.0  # r = 0.5 < 0.8, A < 0
    assert _grad_of_logp(+1.0, math.log(0.44), math.log(0.4)) != 0.0  # r = 1.1 inside


def test_kl_term_pulls_policy_towards_reference():
    logp = torch.tensor([[math.log(0.9)]], requires_grad=True)
    out = grpo_loss(logp, logp.detach(), torch.tensor([[math.log(0.5)]]), torch.tensor([0.0]),
                    torch.ones(1, 1), LossSettings(beta=0.1))
    out.loss.backward()
    assert out.kl.item() > 0 and logp.grad.item() > 0  # descent lowers logp towards the reference
