"""Reward sources behind one contract: `f(prompts, completions, **columns) -> list[float | None]`.

    import rewards
    correct = rewards.build("correctness")             # a registered reward
    mine = rewards.build("my_pkg.my_rewards:brevity")  # a user's (TRL) reward function
    scores = rewards.score_all({"correctness": (correct, 1.0), "brevity": (mine, 0.1)},
                               prompts, completions, {"answer": answers})
    scores.total, scores.per_reward, scores.errors, scores.messages, scores.metrics()

Importing this package is light (no torch): rewards are imported when built.
See rewards/README.md for every reward, its parameters, the None rule and the combination rule.
"""

from rewards.combine import Scores, score_all
from rewards.registry import available, build

__all__ = ["Scores", "available", "build", "score_all"]
