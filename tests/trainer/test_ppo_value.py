"""The PPO value model on the tiny policy: where it reads, that it starts at 0, that it learns."""

import pytest
import torch

from grpo_lab.trainer.config import from_dict
from grpo_lab.objective.functions import clipped_value_loss, gae
from grpo_lab.trainer.value import build_value_model, token_values
from grpo_lab.trainer.decode import Sampling
from grpo_lab.trainer.rollout import sample


@pytest.fixture()
def rollout(model_and_tokenizer):
    policy, tokenizer = model_and_tokenizer
    torch.manual_seed(0)
    return sample(policy, tokenizer, ["1+2=", "3+4=", "10+0="], Sampling(4, 4), torch.device("cpu"))


def value_model(policy):
    cfg = from_dict({"algo": "ppo", "name": "t", "runs_dir": "/nonexistent"})
    return build_value_model(cfg, policy, torch.device("cpu"))


def test_a_separate_model_copied_from_the_policy_with_a_zero_head(model_and_tokenizer, rollout):
    policy, _ = model_and_tokenizer
    vm = value_model(policy)
    policy_ids = {id(p) for p in policy.parameters()}
    assert not any(id(p) in policy_ids for p in vm.parameters())  # nothing shared: its own weights
    body = dict(policy.base_model.named_parameters())
    assert all(torch.equal(p, body[name]) for name, p in vm.backbone.named_parameters())
    assert sum(p.numel() for p in vm.parameters()) == sum(body[n].numel() for n in body) + policy.config.hidden_size + 1
    with torch.no_grad():
        v = token_values(vm, rollout)
    assert v.shape == rollout.completion_mask.shape
    assert v.abs().sum() == 0  # every prediction starts at 0


def test_value_of_token_t_sees_only_the_prompt_and_earlier_tokens(model_and_tokenizer, rollout):
    policy, _ = model_and_tokenizer
    vm = value_model(policy)
    torch.nn.init.normal_(vm.head.weight)  # a non-zero head so values differ by position
    with torch.no_grad():
        before = token_values(vm, rollout)
        changed = rollout.input_ids.clone()
        changed[:, rollout.prompt_len + 1] = (changed[:, rollout.prompt_len + 1] + 1) % 40  # alter token 1
        after = token_values(vm, type(rollout)(changed, rollout.attention_mask, rollout.prompt_len,
                                               rollout.completion_mask, rollout.truncated, rollout.completions, 0.0))
    # V_0 and V_1 are the states before tokens 0 and 1 were drawn: token 1 cannot affect them
    assert torch.allclose(before[:, :2], after[:, :2], atol=1e-6)
    assert not torch.allclose(before[:, 2:], after[:, 2:])


def test_value_loss_decreases_on_a_fixed_batch(model_and_tokenizer, rollout):
    policy, _ = model_and_tokenizer
    vm = value_model(policy)
    mask = rollout.completion_mask.float()
    # a fixed batch: score 1 for the first two prompts' completions, 0 for the third, on the last token
    rewards = torch.zeros_like(mask)
    last = rollout.lengths - 1
    rewards[torch.arange(len(last)), last] = torch.tensor([1.0] * 8 + [0.0] * 4)
    optimizer = torch.optim.AdamW(vm.parameters(), lr=2e-3)
    losses = []
    for epoch in range(4):  # like 4 PPO steps on the same data: the clip is around each step's old values
        with torch.no_grad():
            old_values = token_values(vm, rollout)
            _, returns = gae(rewards, old_values, mask, 1.0, 0.95)
        for _ in range(5):
            loss, _ = clipped_value_loss(token_values(vm, rollout), old_values, returns, mask, clip=0.2)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    assert losses[-1] < 0.25 * losses[0], losses
    assert all(b <= a + 1e-3 for a, b in zip(losses[::5], losses[5::5])), losses  # epoch starts go down
