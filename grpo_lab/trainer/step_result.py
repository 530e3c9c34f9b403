"""What one training step hands back to the run loop: its scalars, and what the run doctor needs to know.

A step function (grpo.grpo_step, ppo.ppo_step; run.step_function picks one) returns a StepResult
instead of leaving flags in the Components it was given: the rewards' failures come back from
scoring in each `rewards.Scores.first_error`, the guard's reason from updates.py's `guard_inputs`
and `optimizer_step`, and the step carries them here to run.py's record_step and the doctor.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class StepResult:
    metrics: dict[str, float]  # the step's scalars row (run.py adds the evaluation's and the timer's)
    # each reward's first failure message of this step (the doctor reports a failing reward)
    reward_notes: dict[str, str] = field(default_factory=dict)
    # why this step's update was skipped (updates.py's guard: a non-finite reward, advantage or loss); the doctor
    # reports it as a critical finding. None: the step updated (or had nothing to train on)
    skipped_update: str | None = None


def first_notes(*notes: dict[str, str]) -> dict[str, str]:
    """Each reward's first failure message over several scorings of a step, taken in order.

    >>> first_notes({"format": "KeyError: 'answer'"}, {"format": "later", "length": "ValueError"})
    {'format': "KeyError: 'answer'", 'length': 'ValueError'}
    """
    out: dict[str, str] = {}
    for part in notes:
        for name, message in part.items():
            out.setdefault(name, message)
    return out
