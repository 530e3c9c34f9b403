"""GAE and PPO's value loss: worked numbers by hand, the two limits of lambda, padding, clipping."""

import math

import pytest
import torch

from grpo_lab.objective.functions import clipped_value_loss, explained_variance, gae, whiten

GAMMA, LAM = 0.9, 0.5


def test_hand_computed_gae_over_three_tokens():
    # one response of 3 tokens, the score 1 on its last token
    rewards = torch.tensor([[0.0, 0.0, 1.0]])
    values = torch.tensor([[0.5, 0.6, 0.8]])
    mask = torch.ones(1, 3)
    adv, ret = gae(rewards, values, mask, GAMMA, LAM)
    # delta_t = r_t + gamma V_{t+1} - V_t, with V after the last token = 0 (the episode ends)
    d2 = 1.0 + GAMMA * 0.0 - 0.8  # 0.2
    d1 = 0.0 + GAMMA * 0.8 - 0.6  # 0.12
    d0 = 0.0 + GAMMA * 0.6 - 0.5  # 0.04
    # A_t = delta_t + gamma lambda A_{t+1}
    a2 = d2  # 0.2
    a1 = d1 + GAMMA * LAM * a2  # 0.21
    a0 = d0 + GAMMA * LAM * a1  # 0.1345
    assert adv[0].tolist() == pytest.approx([a0, a1, a2])
    assert adv[0].tolist() == pytest.approx([0.1345, 0.21, 0.2])
    assert ret[0].tolist() == pytest.approx([0.6345, 0.81, 1.0])  # returns = advantages + values


def test_padding_is_ignored_and_ends_the_episode():
    # a 2-token response padded to 3: whatever sits in the padding must not leak backwards
    rewards = torch.tensor([[0.0, 1.0, 5.0]])
    values = torch.tensor([[0.2, 0.4, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    adv, ret = gae(rewards, values, mask, GAMMA, LAM)
    a1 = 1.0 - 0.4  # the last real token: no bootstrap from the padding's value
    a0 = (GAMMA * 0.4 - 0.2) + GAMMA * LAM * a1
    assert adv[0].tolist() == pytest.approx([a0, a1, 0.0])
    assert ret[0].tolist() == pytest.approx([a0 + 0.2, 1.0, 0.0])


def _batch(seed=0, B=5, T=6):
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(B, T, generator=g)
    values = torch.randn(B, T, generator=g)
    lengths = torch.tensor([6, 1, 3, 5, 2])
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    return rewards * mask, values, mask, lengths


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_lambda_one_is_monte_carlo_return_minus_value(gamma):
    rewards, values, mask, lengths = _batch()
    adv, ret = gae(rewards, values, mask, gamma, lam=1.0)
    for i, n in enumerate(lengths.tolist()):
        for t in range(n):
            mc = sum(gamma ** (k - t) * rewards[i, k].item() for k in range(t, n))
            assert adv[i, t].item() == pytest.approx(mc - values[i, t].item(), abs=1e-5)
            assert ret[i, t].item() == pytest.approx(mc, abs=1e-5)
    assert (adv * (1 - mask)).abs().sum() == 0 and (ret * (1 - mask)).abs().sum() == 0


@pytest.mark.parametrize("gamma", [1.0, 0.9])
def test_lambda_zero_is_the_one_step_td_error(gamma):
    rewards, values, mask, lengths = _batch(seed=1)
    adv, _ = gae(rewards, values, mask, gamma, lam=0.0)
    for i, n in enumerate(lengths.tolist()):
        for t in range(n):
            next_v = values[i, t + 1].item() if t + 1 < n else 0.0
            td = rewards[i, t].item() + gamma * next_v - values[i, t].item()
            assert adv[i, t].item() == pytest.approx(td, abs=1e-5)


def test_single_final_reward_with_gamma_one_and_lambda_one():
    # the RLHF case: only the last token is rewarded, no discount: every token's return is the score
    rewards = torch.tensor([[0.0, 0.0, 0.0, 1.0]])
    values = torch.tensor([[0.3, 0.1, 0.7, 0.4]])
    adv, ret = gae(rewards, values, torch.ones(1, 4), 1.0, 1.0)
    assert ret[0].tolist() == pytest.approx([1.0] * 4)
    assert adv[0].tolist() == pytest.approx([0.7, 0.9, 0.3, 0.6])


def test_whiten_gives_zero_mean_unit_variance_on_real_tokens_only():
    x = torch.tensor([[1.0, 2.0, 3.0, 100.0], [4.0, 5.0, -50.0, 7.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    w = whiten(x, mask)
    real = w[mask.bool()]
    assert real.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert real.var(unbiased=False).item() == pytest.approx(1.0, abs=1e-4)
    assert w[~mask.bool()].abs().sum() == 0
    assert whiten(torch.zeros(1, 3), torch.ones(1, 3)).abs().sum() == 0  # no spread: zeros, not NaN


def test_clipped_value_loss_worked_numbers():
    old = torch.tensor([[0.0, 0.0, 0.0]])
    returns = torch.tensor([[1.0, 1.0, -1.0]])
    values = torch.tensor([[0.5, 0.1, 0.5]])
    # token 0: V moved 0.5 past the 0.2 clip towards R: clipped (0.2 - 1)^2 = 0.64 > (0.5 - 1)^2 = 0.25
    # token 1: inside the clip range: (0.1 - 1)^2 = 0.81 either way
    # token 2: V moved away from R: unclipped (0.5 + 1)^2 = 2.25 > clipped (0.2 + 1)^2 = 1.44
    loss, frac = clipped_value_loss(values, old, returns, torch.ones(1, 3), clip=0.2)
    assert loss.item() == pytest.approx(0.5 * (0.64 + 0.81 + 2.25) / 3)
    assert frac.item() == pytest.approx(1 / 3)


def test_clipped_value_loss_stops_the_gradient_only_where_clipped():
    old = torch.zeros(1, 3)
    returns = torch.tensor([[1.0, 1.0, -1.0]])
    values = torch.tensor([[0.5, 0.1, 0.5]], requires_grad=True)
    loss, _ = clipped_value_loss(values, old, returns, torch.ones(1, 3), clip=0.2)
    loss.backward()
    grad = values.grad[0].tolist()
    assert grad[0] == 0.0  # already moved past the clip towards the target: no further push
    assert grad[1] == pytest.approx((0.1 - 1.0) / 3)
    assert grad[2] == pytest.approx((0.5 + 1.0) / 3)  # moving away is always pulled back


def test_value_loss_ignores_padding():
    values = torch.tensor([[0.5, 123.0]])
    loss, frac = clipped_value_loss(values, torch.tensor([[0.5, 0.0]]), torch.tensor([[1.0, 0.0]]),
                                    torch.tensor([[1.0, 0.0]]), clip=0.2)
    assert loss.item() == pytest.approx(0.5 * 0.25) and frac.item() == 0.0


def test_explained_variance():
    target = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    mask = torch.ones(1, 4)
    assert explained_variance(target, target, mask) == pytest.approx(1.0)
    assert explained_variance(torch.full_like(target, 2.5), target, mask) == pytest.approx(0.0)
    assert explained_variance(-target, target, mask) < 0
    assert math.isnan(explained_variance(target, torch.ones(1, 4), mask))  # constant target: undefined
