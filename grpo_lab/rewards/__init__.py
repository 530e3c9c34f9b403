"""Reward sources behind one contract: `f(prompts, completions, **columns) -> list[float | None]`.

    from grpo_lab import rewards
    correct = rewards.build("correctness")             # a registered reward
    mine = rewards.build("my_pkg.my_rewards:brevity")  # a user's (TRL) reward function
    scores = rewards.score_all({"correctness": (correct, 1.0), "brevity": (mine, 0.1)},
                               prompts, completions, {"answer": answers})
    scores.total, scores.per_reward, scores.errors, scores.messages, scores.metrics()

Importing this package is light (no torch): rewards are imported when built.
See grpo_lab/rewards/README.md for every reward, its parameters, the None rule and the combination rule.
"""

from grpo_lab.rewards.combine import Scores, score_all
from grpo_lab.rewards.registry import available, build

__all__ = ["Scores", "available", "build", "score_all"]
