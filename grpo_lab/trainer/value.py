"""PPO's value model: a copy of the policy's transformer body with a scalar head (see grpo_lab/trainer/ppo.py).

Kept apart from the PPO loop because run.py builds it at set-up and checkpoints hold it.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from grpo_lab.trainer.config import Config
from grpo_lab.trainer.rollout import Rollout, position_ids


class ValueModel(nn.Module):
    """V(q, o_<t): the policy's transformer body and a linear head, one scalar per position."""

    def __init__(self, backbone: nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, input_ids, attention_mask, position_ids) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask,
                               position_ids=position_ids).last_hidden_state  # (B, L, H)
        return self.head(hidden.float()).squeeze(-1)  # (B, L)


def build_value_model(cfg: Config, policy: nn.Module, device: torch.device) -> ValueModel:
    """A copy of the policy's body (as it is now: after the warm start) with a zero head.

    The body trains as the policy does: every weight, or with LoRA only the copied adapters (the
    head always trains). Gradient checkpointing, if on, is not carried over to the copy.
    """
    causal_lm = policy.get_base_model() if hasattr(policy, "get_base_model") else policy  # under a peft wrapper
    backbone = copy.deepcopy(causal_lm.base_model)  # transformers: the body under the LM head
    hidden_size = causal_lm.config.get_text_config().hidden_size
    return ValueModel(backbone, hidden_size).to(device).eval()  # eval: no dropout


def token_values(value_model: ValueModel, rollout: Rollout) -> torch.Tensor:
    """V_t for each completion token (B, T): the value of the state just before token t is drawn."""
    values = value_model(rollout.input_ids, rollout.attention_mask, position_ids(rollout.attention_mask))
    # as with logits, position p sees tokens up to p: the state before completion token t is P-1+t
    return values[:, rollout.prompt_len - 1:-1]
