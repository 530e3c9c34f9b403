"""Reward sources behind one contract: `f(prompts, completions, **columns) -> list[float | None]`,
called by keyword as TRL's GRPOTrainer calls it (combine.py).

    from grpo_lab import rewards
    correct = rewards.build("correctness")             # a registered reward
    mine = rewards.build("my_pkg.my_rewards:brevity")  # a user's (TRL) reward function
    cosine = rewards.build("trl.rewards:get_cosine_scaled_reward", max_len=64)  # a factory, called once
    scores = rewards.score_all({"correctness": (correct, 1.0), "brevity": (mine, 0.1)},
                               prompts, completions, {"answer": answers})
    scores.total, scores.per_reward, scores.errors, scores.messages, scores.metrics()
    scores.extra, scores.logged   # what the rewards logged with log_extra / log_metric

Importing this package is light (no torch): rewards are imported when built.
See grpo_lab/rewards/README.md for every reward, its parameters, the None rule and the combination rule.
"""

from grpo_lab.rewards.combine import CALL_ARGS, Scores, SignatureError, call_problem, call_reward, score_all
from grpo_lab.rewards.registry import available, build

__all__ = ["CALL_ARGS", "Scores", "SignatureError", "available", "build", "call_problem", "call_reward", "score_all"]
