"""GRPO's variants through the trainer's own functions: hand-made tensors with numbers worked out
by hand, the edge cases (a group with equal rewards, every response truncated), and the direction
each option moves a token's log-probability in."""

import math

import pytest
import torch

from grpo_lab.objective.functions import (
    LossSettings,
    IMPORTANCE_LEVELS,
    LOSS_AGGREGATIONS,
    aggregate,
    entropy,
    group_advantages,
    grpo_loss,
    mask_truncated,
    sequence_ratio,
)

NAN = float("nan")


def lengths_mask(*lengths: int, width: int | None = None) -> torch.Tensor:
    width = width or max(lengths)
    return (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).float()


# --- batch std ----------------------------------------------------------------------------------


def test_batch_std_centres_per_group_and_divides_by_the_batch_std():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    out = group_advantages(rewards, "batch")
    batch_std = math.sqrt(0.625 * 0.375)  # 5 of 8 rewards are 1: a Bernoulli(5/8) std
    assert out.mean.tolist() == pytest.approx([0.25, 1.0])
    assert out.std.tolist() == pytest.approx([batch_std, batch_std])
    assert out.advantages[0].tolist() == pytest.approx([0.75 / batch_std] + [-0.25 / batch_std] * 3, abs=1e-6)
    assert out.advantages[1].tolist() == [0.0] * 4
    assert out.zero_std.tolist() == [False, True]  # still describes each group's own spread
    # the group's own std (the chapter) is smaller here: 0.433 against 0.484
    assert group_advantages(rewards).advantages[0, 0].item() == pytest.approx(0.75 / math.sqrt(0.1875), abs=1e-6)


def test_batch_std_leaves_unscored_rewards_out_and_never_gives_nan():
    out = group_advantages(torch.tensor([[2.0, NAN, 0.0], [NAN, NAN, NAN]]), "batch")
    assert out.std[0].item() == pytest.approx(1.0)  # scored rewards 2 and 0
    assert out.advantages.tolist() == [[1.0, 0.0, -1.0], [0.0, 0.0, 0.0]]
    same = group_advantages(torch.tensor([[0.5, 0.5], [0.5, 0.5]]), "batch")
    assert not torch.isnan(same.advantages).any() and same.advantages.abs().sum() == 0


def test_batch_std_with_one_group_is_the_chapter():
    rewards = torch.tensor([[1.0, 3.0, 2.0, 6.0]])
    assert torch.allclose(group_advantages(rewards, "batch").advantages, group_advantages(rewards).advantages)


# --- GSPO: one ratio per response ---------------------------------------------------------------


def test_sequence_ratio_is_the_geometric_mean_over_the_response_own_tokens():
    old = torch.log(torch.tensor([[0.5, 0.5, 0.5], [0.5, 0.9, 0.9]]))
    new = torch.log(torch.tensor([[0.5, 1.0, 0.25], [0.8, 0.1, 0.1]]))
    mask = lengths_mask(3, 1)
    s = sequence_ratio(new, old, mask)
    assert s[0].item() == pytest.approx((1.0 * 2.0 * 0.5) ** (1 / 3))  # = 1: the two odd tokens cancel
    assert s[1].item() == pytest.approx(1.6)  # padding (ratio 1/9) is not part of the response


def test_sequence_level_clips_the_whole_response():
    # one token at r = 2.0, two at r = 1.0: token level clips only that token; the response's
    # ratio 2^(1/3) = 1.26 leaves [0.8, 1.2], so at sequence level every token stops.
    old = torch.log(torch.tensor([[0.25, 0.5, 0.5]]))
    new_init = torch.log(torch.tensor([[0.5, 0.5, 0.5]]))
    mask, adv = torch.ones(1, 3), torch.tensor([1.0])
    grads = {}
    for level in IMPORTANCE_LEVELS:
        logp = new_init.clone().requires_grad_(True)
        out = grpo_loss(logp, old, None, adv, mask, LossSettings(importance_level=level))
        out.loss.backward()
        grads[level] = logp.grad[0].tolist()
        if level == "sequence":
            assert out.ratio[0].tolist() == pytest.approx([2 ** (1 / 3)] * 3)
            assert out.clipped_high[0].tolist() == [True, True, True]
        else:
            assert out.clipped_high[0].tolist() == [True, False, False]
    assert grads["token"][0] == 0.0 and grads["token"][1] < 0  # descent raises the two unclipped tokens
    assert grads["sequence"] == [0.0, 0.0, 0.0]


def test_sequence_level_gradient_spreads_evenly_over_the_tokens():
    # inside the clip range d s / d logp_t = s / |o|: every token of the response gets the same push
    old = torch.log(torch.tensor([[0.5, 0.4, 0.5, 0.5]]))
    logp = torch.log(torch.tensor([[0.5, 0.44, 0.5, 0.5]])).requires_grad_(True)  # one token at r = 1.1
    out = grpo_loss(logp, old, None, torch.tensor([2.0]), lengths_mask(3, width=4),
                    LossSettings(importance_level="sequence"))
    out.loss.backward()
    s = 1.1 ** (1 / 3)
    assert logp.grad[0, :3].tolist() == pytest.approx([-2.0 * s / 3] * 3)
    assert logp.grad[0, 3].item() == 0.0  # padding


def test_at_ratio_one_both_levels_give_the_same_gradient():
    # pass 1 (pi_theta == pi_old): s = r = 1, and d s/d logp_t = 1/|o| = what 1/|o| sum_t r_t gives.
    torch.manual_seed(0)
    logp0 = torch.randn(3, 5) - 1.0
    mask, adv = lengths_mask(5, 2, 4), torch.tensor([1.0, -0.5, 0.3])
    grads = []
    for level in IMPORTANCE_LEVELS:
        logp = logp0.clone().requires_grad_(True)
        grpo_loss(logp, logp0, None, adv, mask, LossSettings(importance_level=level)).loss.backward()
        grads.append(logp.grad)
    assert torch.allclose(grads[0], grads[1], atol=1e-7)


def test_sequence_level_needs_one_advantage_per_response():
    with pytest.raises(ValueError, match="importance_level"):
        grpo_loss(torch.zeros(1, 2), torch.zeros(1, 2), None, torch.zeros(1, 2), torch.ones(1, 2),
                  LossSettings(importance_level="sequence"))
    with pytest.raises(ValueError, match="importance_level: must be one of"):
        LossSettings(importance_level="word")


# --- Dr. GRPO: the constant normaliser ----------------------------------------------------------


def test_constant_normaliser_divides_the_sum_by_responses_times_max_len():
    per_token = torch.tensor([[1.0, 2.0, 3.0, 9.0], [4.0, 9.0, 9.0, 9.0]])
    mask = lengths_mask(3, 1, width=4)
    assert aggregate(per_token, mask, "constant", max_len=8).item() == pytest.approx((1 + 2 + 3 + 4) / (2 * 8))
    assert aggregate(per_token, mask, "sequence").item() == pytest.approx((2.0 + 4.0) / 2)
    assert aggregate(per_token, mask, "token").item() == pytest.approx(10 / 4)
    with pytest.raises(ValueError, match="max_len"):
        aggregate(per_token, mask, "constant")


def test_constant_normaliser_gives_every_token_the_same_weight_whatever_the_length():
    # weight of token t = d aggregate / d x_t: 1/(B L) for every real token, in any response
    x = torch.zeros(2, 6, requires_grad=True)
    mask = lengths_mask(6, 2)
    aggregate(x, mask, "constant", max_len=6).backward()
    assert x.grad[mask.bool()].tolist() == pytest.approx([1 / 12] * 8)
    x.grad = None
    aggregate(x, mask, "sequence").backward()  # the chapter: 1/(G |o_i|), larger for the short one
    assert x.grad[0, 0].item() == pytest.approx(1 / 12) and x.grad[1, 0].item() == pytest.approx(1 / 4)


def test_a_long_wrong_answer_is_diluted_only_by_per_response_averaging():
    # short right answer (A = +1, 2 tokens) and long wrong one (A = -1, 8 tokens), ratio 1:
    # the chapter pushes the wrong answer's tokens down 4x less each; constant pushes each equally.
    logp = torch.zeros(2, 8, requires_grad=True)
    mask = lengths_mask(2, 8)
    grpo_loss(logp, logp.detach(), None, torch.tensor([1.0, -1.0]), mask).loss.backward()
    assert -logp.grad[0, 0].item() == pytest.approx(1 / 4) and -logp.grad[1, 0].item() == pytest.approx(-1 / 16)
    logp.grad = None
    grpo_loss(logp, logp.detach(), None, torch.tensor([1.0, -1.0]), mask,
              LossSettings(aggregation="constant", max_len=8)).loss.backward()
    assert -logp.grad[0, 0].item() == pytest.approx(1 / 16) and -logp.grad[1, 0].item() == pytest.approx(-1 / 16)


# --- truncated completions out of the loss ------------------------------------------------------


def test_mask_truncated_zeroes_whole_responses():
    mask = lengths_mask(3, 2, 3)
    out = mask_truncated(mask, torch.tensor([True, False, True]))
    assert out.tolist() == [[0, 0, 0], [1, 1, 0], [0, 0, 0]]


def test_truncated_responses_get_no_gradient_and_do_not_count():
    torch.manual_seed(1)
    logp0 = torch.randn(3, 4) - 1.0
    old = logp0 + 0.05 * torch.randn(3, 4)
    mask, adv = lengths_mask(4, 2, 4), torch.tensor([1.0, -1.0, 0.5])
    truncated = torch.tensor([True, False, False])
    for agg in ("sequence", "token"):
        logp = logp0.clone().requires_grad_(True)
        out = grpo_loss(logp, old, None, adv, mask, LossSettings(aggregation=agg), truncated=truncated)
        out.loss.backward()
        assert logp.grad[0].abs().sum().item() == 0.0 and logp.grad[1:].abs().sum().item() > 0
        # the same number as a batch that never held the truncated response
        alone = grpo_loss(logp0[1:], old[1:], None, adv[1:], mask[1:], LossSettings(aggregation=agg))
        assert out.loss.item() == pytest.approx(alone.loss.item(), abs=1e-6)
        assert out.loss_mask[0].sum().item() == 0


def test_every_response_truncated_gives_zero_loss_not_nan():
    logp = torch.zeros(2, 3, requires_grad=True)
    out = grpo_loss(logp, logp.detach(), None, torch.tensor([1.0, -1.0]), torch.ones(2, 3),
                    truncated=torch.tensor([True, True]))
    out.loss.backward()
    assert out.loss.item() == 0.0 and logp.grad.abs().sum().item() == 0.0


# --- entropy bonus ------------------------------------------------------------------------------


def test_entropy_bonus_raises_entropy_and_is_in_the_loss():
    torch.manual_seed(2)
    logits = (torch.randn(2, 3, 5) * 3).requires_grad_(True)
    mask = torch.ones(2, 3)
    tokens = torch.zeros(2, 3, 1, dtype=torch.long)

    def loss_of(lg: torch.Tensor):
        logp_all = torch.log_softmax(lg, dim=-1)
        logp = logp_all.gather(-1, tokens).squeeze(-1)
        h = entropy(logp_all)
        return grpo_loss(logp, logp.detach(), None, torch.zeros(2), mask, LossSettings(entropy_coef=0.1), entropy=h), h

    out, h = loss_of(logits)
    assert out.entropy.item() == pytest.approx(h.mean().item())
    assert out.loss.item() == pytest.approx(-0.1 * h.mean().item())  # A = 0: only the bonus is left
    out.loss.backward()
    with torch.no_grad():
        stepped = logits - 1.0 * logits.grad
    assert loss_of(stepped)[1].mean().item() > h.mean().item()


def test_no_coefficient_no_bonus():
    logp = torch.zeros(1, 2)
    out = grpo_loss(logp, logp, None, torch.tensor([1.0]), torch.ones(1, 2), entropy=torch.ones(1, 2))
    assert out.loss.item() == pytest.approx(-1.0) and out.entropy.item() == 0.0


# --- every option: a positive advantage raises the token, a negative one lowers it ---------------

OPTIONS = {
    "chapter": {},
    "token mean": {"aggregation": "token"},
    "constant": {"aggregation": "constant", "max_len": 4},
    "sequence ratio": {"importance_level": "sequence"},
    "mask truncated": {"truncated": torch.tensor([False, False, True])},
    "entropy bonus": {"entropy": torch.zeros(3, 4), "entropy_coef": 0.01},
}


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("ratio", [1.0, 1.1])
def test_gradient_sign_follows_the_advantage(option, ratio):
    mask = lengths_mask(4, 2, 3)
    old = torch.full((3, 4), math.log(0.4))
    logp = (old + math.log(ratio)).clone().requires_grad_(True)
    adv = group_advantages(torch.tensor([[1.0, 0.0, 1.0]]), "batch").advantages[0]
    options = dict(OPTIONS[option])
    tensors = {k: options.pop(k) for k in ("truncated", "entropy") if k in options}
    grpo_loss(logp, old, None, adv, mask, LossSettings(**options), **tensors).loss.backward()
    step = -logp.grad  # what gradient descent adds to logp
    assert (step[0, :4] > 0).all()  # A > 0: more likely
    assert (step[1, :2] < 0).all()  # A < 0: less likely
    assert step[1, 2:].abs().sum() == 0  # padding never moves
    if option == "mask truncated":
        assert step[2].abs().sum() == 0
    else:
        assert (step[2, :3] > 0).all()


def test_batch_std_keeps_each_advantage_sign():
    rewards = torch.tensor([[3.0, 1.0, 2.0], [0.0, 0.0, 5.0]])
    for mode in ("group", "sample", "batch", "none"):
        signs = torch.sign(group_advantages(rewards, mode).advantages)
        assert signs.tolist() == [[1.0, -1.0, 0.0], [-1.0, -1.0, 1.0]], mode


def test_every_aggregation_is_offered():
    assert LOSS_AGGREGATIONS == ("sequence", "token", "constant")
    assert IMPORTANCE_LEVELS == ("token", "sequence")
