"""The objective's named choices and the rules between them: no torch, so any reader may import it.

Each fact is written once here; the trainer's config validates against these lists, the importers
map other trainers' names onto them, and the dashboard reads runs with them.
"""

from __future__ import annotations

from dataclasses import dataclass

# The divisor of each std_mode, as the Groups page shows it; STD_MODES is its keys, so a new mode
# cannot reach the trainer without a formula for the page.
STD_FORMULAS = {
    "group": "std = sqrt( 1/G * sum_i (r_i - mean)^2 )",
    "sample": "std = sqrt( 1/(G-1) * sum_i (r_i - mean)^2 )",
    "batch": "std = sqrt( 1/M * sum_j (r_j - mean_step)^2 ), over the step's M scored rewards",
    "none": "std = 1",
}
STD_MODES = tuple(STD_FORMULAS)
LOSS_AGGREGATIONS = ("sequence", "token", "constant")
IMPORTANCE_LEVELS = ("token", "sequence")
KL_ESTIMATORS = ("k1", "k3")

DEFAULT_EPSILON = 0.2  # the chapter's clip range, [0.8, 1.2]


def clip_range(epsilon: float = DEFAULT_EPSILON, epsilon_high: float | None = None) -> tuple[float, float]:
    """(1 - epsilon, 1 + epsilon_high): the ratios outside it are clipped. Without epsilon_high the
    range is the chapter's symmetric one; a larger epsilon_high is DAPO's "clip-higher".

    >>> clip_range()
    (0.8, 1.2)
    >>> clip_range(0.2, 0.28)
    (0.8, 1.28)
    """
    return 1.0 - epsilon, 1.0 + (epsilon if epsilon_high is None else epsilon_high)


def group_of(row: int, group_size: int) -> int:
    """The group of a rollout row: a step's rows are its groups' G completions, one group after the
    other (row i belongs to group i // G).

    >>> [group_of(i, 4) for i in range(8)]
    [0, 0, 0, 0, 1, 1, 1, 1]
    """
    return row // group_size

# the sampler/trainer mismatch corrections (objective/mismatch.py), TRL's vllm_importance_sampling_mode names
MISMATCH_MODES = ("none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


@dataclass(frozen=True)
class LossSettings:
    """What the clipped objective needs besides the tensors, built once (the trainer: from its
    config, `Config.loss_settings`) and passed as one value. The defaults are the chapter's GRPO
    without KL; each other value is a variant (see `grpo_lab.objective.functions.grpo_loss`)."""

    epsilon: float = DEFAULT_EPSILON
    epsilon_high: float | None = None  # None: epsilon (see clip_range)
    beta: float = 0.0  # KL weight (k3, per token)
    aggregation: str = "sequence"
    max_len: int | None = None  # the longest completion allowed: aggregation "constant" divides by it
    importance_level: str = "token"
    entropy_coef: float = 0.0

    def __post_init__(self):
        for name, allowed in (("aggregation", LOSS_AGGREGATIONS), ("importance_level", IMPORTANCE_LEVELS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}: must be one of {allowed}, got {getattr(self, name)!r}")

    @property
    def clip_range(self) -> tuple[float, float]:
        return clip_range(self.epsilon, self.epsilon_high)
