"""Stage 4 of a step: pi_old's and the reference's log-probabilities of the batch, taken once, before
any update, by the same forward pass the updates use (rollout.token_logprobs): the first pass then
sees ratio 1 exactly.

The reference is there when beta > 0 (the KL penalty) or when measure_kl asks for KL with beta 0:
then its log-probabilities only feed the logged KL (grpo.py, ppo.py), never the loss.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from grpo_lab.trainer.batch import Batch
from grpo_lab.trainer.rollout import token_logprobs

if TYPE_CHECKING:  # the type alone: Components is built by run.py's prepare
    from grpo_lab.trainer.components import Components


def with_logprobs(c: Components, batch: Batch, policy: bool = True) -> Batch:
    """The batch with old_logp and entropy (pi_old's) and ref_logp (the reference's; None without one).

    policy False: the reference's only. With one pass over one minibatch, pi_old is the update's
    own forward, detached (GRPO takes it there), so a separate forward would only repeat it."""
    old_logp, entropy = batch.old_logp, batch.entropy
    with torch.no_grad():
        if policy:
            with c.timer.phase("old_logp"):
                old_logp, entropy = token_logprobs(c.policy, batch.rollout, c.cfg.temperature, with_entropy=True)
        with c.timer.phase("ref"):
            ref_logp = (token_logprobs(c.reference, batch.rollout, c.cfg.temperature)[0]
                        if c.reference is not None else None)
    return replace(batch, old_logp=old_logp, entropy=entropy, ref_logp=ref_logp)
