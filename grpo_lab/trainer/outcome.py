"""How a run ends, for a script that reads only the exit status and the last line.

    0  finished (every step), or stopped by a signal (Ctrl-C, SIGTERM, the dashboard's Stop)
    1  failed: an error, or every step ran and no reward ever scored a completion
    2  refused before it started (a config error, one line)
    3  stopped by the run doctor (--stop-on) for a finding at or above that severity

A run whose rewards never scored anything trained on no signal at all: with `--stop-on none` the
doctor's `reward_unscored` finding does not stop it, so the run goes on to its last step, but it
ends `failed` (status.json says why), not `finished`, and exits 1. The last line of stderr says
which of these happened.
"""

from __future__ import annotations

from grpo_lab.trainer.doctor import nothing_scored

FINISHED, FAILED, REFUSED, DOCTOR_STOPPED = 0, 1, 2, 3


class Scored:
    """Whether any step of the run scored a completion (doctor.nothing_scored: a reward scored one; an
    inf or NaN mean of scores float32 cannot hold was scored, and the guard of updates.py handles it)."""

    def __init__(self) -> None:
        self.steps = 0
        self.scored = 0

    def add(self, metrics: dict[str, float]) -> None:
        self.steps += 1
        self.scored += not nothing_scored(metrics)

    def never(self) -> str | None:
        """The failure of a run whose rewards never scored anything (None when some step scored).

        >>> import math
        >>> s = Scored(); s.add({"reward/mean": math.nan}); s.add({"reward/mean": math.nan}); s.never()[:46]
        'no reward scored any completion in its 2 steps'
        >>> s.add({"reward/mean": math.nan, "rewards/f/none_frac": 0.25}); s.never() is None  # +inf and -inf: scored
        True
        >>> s.add({"reward/mean": 0.5}); s.never() is None
        True
        """
        if self.steps == 0 or self.scored:
            return None
        return (f"no reward scored any completion in its {self.steps} steps: the run trained on no signal "
                "(see each reward's errors in train.log and the run doctor's reward_unscored finding)")


def doctor_stop_line(step: int, stop_on: str, reason: str) -> str:
    """The last line of a run the doctor stopped.

    >>> doctor_stop_line(3, "critical", "doctor (kl_explosion, critical) at step 3: kl/mean 2e+03")
    'stopped at step 3 by --stop-on critical: doctor (kl_explosion, critical) at step 3: kl/mean 2e+03 (exit status 3)'
    """
    return f"stopped at step {step} by --stop-on {stop_on}: {reason} (exit status {DOCTOR_STOPPED})"
