"""GRPO's updates (grpo_lab/trainer/grpo.py) hand back what they make and write into nothing they were
given: with one pass over one minibatch, pi_old is the update's own forward, detached, returned in a new
batch; the batch the step passed in keeps every tensor it had."""

import pytest
import torch

from grpo_lab.trainer.advantages import grpo_advantages
from grpo_lab.trainer.config import from_dict
from grpo_lab.trainer.grpo import grpo_updates
from grpo_lab.trainer.logprobs import with_logprobs
from grpo_lab.trainer.rollout import token_logprobs
from grpo_lab.trainer.run import prepare, release
from grpo_lab.trainer.sampling import sample_groups, step_prompts
from grpo_lab.trainer.scoring import score


@pytest.fixture
def comps(request, tmp_path):
    """A GRPO run's components with one minibatch and `passes` passes (1 unless the test's param says),
    no warm start, nothing logged."""
    comps, _, _, _ = prepare(from_dict({"sft_steps": 0, "logging": "off", "runs_dir": str(tmp_path), "name": "updates",
                                        "prompts_per_step": 2, "group_size": 4, "minibatches": 1,
                                        "passes": getattr(request, "param", 1)}))
    yield comps
    release(comps)


def step_batch(comps):
    """Step 1's batch and advantages as grpo_step hands them to the updates (reference log-probs only)."""
    batch = score(comps, sample_groups(comps, step_prompts(comps, 1)), 1)
    return with_logprobs(comps, batch, policy=False), grpo_advantages(comps, batch)


def test_the_first_pass_returns_pi_old_and_leaves_the_batch_given_as_it_was(comps):
    batch, adv = step_batch(comps)
    given = dict(vars(batch))
    values = {name: v.clone() for name, v in given.items() if isinstance(v, torch.Tensor)}
    with torch.no_grad():  # pi_old as a separate forward before the update takes it
        logp, entropy = token_logprobs(comps.policy, batch.rollout, comps.cfg.temperature, with_entropy=True)

    done = grpo_updates(comps, batch, adv, reuse_first_pass=True)

    assert len(done.updates.losses) == 1
    # the batch given: the same objects, the same numbers (its pi_old still NaN: not taken before the update)
    assert all(getattr(batch, name) is value for name, value in given.items())
    for name, value in values.items():
        torch.testing.assert_close(getattr(batch, name), value, rtol=0, atol=0, equal_nan=True, msg=name)
    assert batch.old_logp.isnan().all()
    # what the updates return: pi_old is the update's forward, the numbers a separate forward gives
    assert done.batch is not batch and done.batch.rollout is batch.rollout
    assert torch.equal(done.batch.old_logp, logp) and torch.equal(done.batch.entropy, entropy)
    assert not done.batch.old_logp.requires_grad and not done.batch.entropy.requires_grad


@pytest.mark.parametrize("comps", [2], indirect=True)
def test_several_passes_return_the_batch_given(comps):
    """pi_old taken before the updates (with_logprobs): the updates return the batch itself."""
    batch, adv = step_batch(comps)
    batch = with_logprobs(comps, batch)
    old_logp = batch.old_logp.clone()
    done = grpo_updates(comps, batch, adv, reuse_first_pass=False)
    assert len(done.updates.losses) == 2
    assert done.batch is batch and torch.equal(batch.old_logp, old_logp)
