"""A resumed PPO run continues with its trained value model, not a fresh copy of the policy."""

import torch
from safetensors.torch import load_file

from grpo_lab.trainer.config import from_dict
from grpo_lab.trainer.run import prepare, release, train


def test_resume_restores_the_value_model(tmp_path):
    # a length reward: random completions differ in length, so every step has a learning signal
    base = {"algo": "ppo", "group_size": 2, "prompts_per_step": 4, "sft_steps": 0, "max_steps": 2,
            "rewards": {"length": 1.0}, "reward_params": {"length": {"min_len": 4, "penalty_per_unit": 0.25}},
            "logging": "off", "runs_dir": str(tmp_path), "name": "r"}
    assert train(from_dict(base)) == 0
    saved = load_file(str(tmp_path / "r" / "checkpoints" / "step-00000002" / "value.safetensors"))
    assert saved["head.weight"].abs().sum() > 0  # it trained: a fresh value head is all zeros

    comps, _, _, first_step = prepare(from_dict({**base, "resume": True, "max_steps": 3}))
    try:
        assert first_step == 3
        restored = comps.value_model.state_dict()
        assert set(saved) <= set(restored)
        for name, tensor in saved.items():
            assert torch.equal(restored[name], tensor), name
    finally:
        release(comps)
