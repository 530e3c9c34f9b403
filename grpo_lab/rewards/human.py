"""Human ratings given while the run trains: scores a step's completions from the ratings people give
*for that step* on the dashboard's Groups page (or with `grpo_lab.rundir.labels.add`).

After sampling, the trainer calls this reward; it writes `labels/waiting.json` (the step's groups,
so the dashboard can show them before the step is logged) and status.json's `waiting`, and waits
until every group of the step is fully rated (or `min_groups` of them, when set) or `wait_s` seconds
have passed, then goes on with what it has. The rules:
- a completion's score is the mean over labelers of each one's latest rating (labels.read), on the
  run's scale (thumbs: 0 / 1; 1-5); `labeler` set: that person's ratings only;
- a rating counts only for the exact text it was given for (`completion_sha`): a resumed run that
  samples the step again keeps the ratings of the completions that came out the same;
- an unrated completion scores None (left out of its group's mean and std, advantage 0);
- the wait is part of the step's `time/reward_s`, and is logged as `rewards/log/human_wait_s`;
- the ratings read are those given up to the moment of the last read, which `labels/closed.json`
  keeps (labels.close_step): a rating given later is late, kept for the reward model and exports,
  never part of the step's reward;
- a stop (SIGTERM, Ctrl-C), during the wait or before it (while the step sampled), ends the wait at
  once: the step trains on what is rated, then the run stops as usual (checkpoint; `--resume` goes on
  with the next step).

It needs to know where the completions sit in the run (rewards/context.py), which the trainer tells
it for a step's scoring on one process without dynamic sampling; elsewhere (the dry run, evaluation,
TRL) it scores None at once.

>>> fn = human_reward(min_groups=1, wait_s=0)
>>> fn(["1+1="], ["2"])      # outside a run: no context, no score
[None]
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time

import numpy as np

from grpo_lab.rewards import context
from grpo_lab.rewards._text import as_text


def human_reward(min_groups: int | None = None, wait_s: float = 300.0, poll_s: float = 0.5, labeler: str = ""):
    """min_groups: groups (all G completions rated) the step waits for (capped at the step's groups);
    None (the default): every group of the step, what a person rating a step expects;
    wait_s: the longest wait, then go on with what is rated; poll_s: how often to look;
    labeler: count only this person's ratings ("" = everyone's, averaged)."""
    if min_groups is not None and (isinstance(min_groups, bool) or not isinstance(min_groups, int) or min_groups < 0):
        raise ValueError(f"human: min_groups must be a whole number >= 0, got {min_groups!r}")
    for name, value in (("wait_s", wait_s), ("poll_s", poll_s)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"human: {name} must be a number of seconds >= 0, got {value!r}")
    if not isinstance(labeler, str):
        raise ValueError(f"human: labeler must be a name (text), got {labeler!r}")

    def human(prompts, completions, log_metric=None, **kw) -> list[float | None]:
        where = context.current()
        if where is None:
            return [None] * len(completions)
        texts = [as_text(c) for c in completions]
        scores, waited = wait_for_ratings(where, texts, min_groups=min_groups, wait_s=float(wait_s),
                                          poll_s=float(poll_s), labeler=labeler)
        if callable(log_metric):
            log_metric("human_wait_s", waited)
        return scores

    return human


def wait_for_ratings(where: context.StepSamples, texts: list[str], *, min_groups: int | None, wait_s: float,
                     poll_s: float, labeler: str = "") -> tuple[list[float | None], float]:
    """(one score or None per completion, seconds waited), as the module docstring describes."""
    from grpo_lab.rundir import labels, status  # noqa: PLC0415 - pandas only when a run scores

    G = where.group_size
    n_groups = len(texts) // G
    shas = [labels.completion_sha(t) for t in texts]
    need = n_groups if min_groups is None else min(min_groups, n_groups)
    start = time.monotonic()
    groups = [{"group": g, "prompt_id": where.prompt_ids[g] if g < len(where.prompt_ids) else "",
               "prompt": where.prompts[g] if g < len(where.prompts) else "", "completions": texts[g * G:(g + 1) * G]}
              for g in range(n_groups)]
    deadline = time.time() + wait_s
    # the stop handler goes in before the waiting record: a stop sent once the record shows (the
    # dashboard's Stop, a test) must end this wait, not only the run after wait_s
    with _stop_ends_wait() as stopped:
        labels.set_waiting(where.run_dir, step=where.step, groups=groups, min_groups=need, deadline=deadline)
        status.set_waiting(where.run_dir, {"for": "ratings", "step": where.step, "since": time.time(),
                                           "deadline": deadline, "groups": n_groups, "need": need})
        try:
            while True:
                # the stop is noted before the read, so the last read sees every rating given before it;
                # the read's moment too: ratings given after it are late (close_step), not read now
                stop, now = bool(stopped) or where.stop_requested(), time.time()
                df = labels.read(where.run_dir)
                scores = _scores(df[df["time"] <= now], where, shas, labeler)
                full = sum(all(scores[g * G + j] is not None for j in range(G)) for g in range(n_groups))
                if full >= need or time.monotonic() - start >= wait_s or stop:
                    labels.close_step(where.run_dir, where.step, now)
                    return scores, time.monotonic() - start
                time.sleep(poll_s)
        finally:
            labels.clear_waiting(where.run_dir)
            status.set_waiting(where.run_dir, None)


@contextlib.contextmanager
def _stop_ends_wait():
    """A list that gets the signal number when SIGTERM / SIGINT arrive during the wait; the handler
    that was there (the trainer's: finish the step, checkpoint, stop) still runs. So a stop ends the
    wait at once instead of after wait_s. Signals can only be caught on the main thread."""
    stopped: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield stopped
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def on_stop(signum, frame) -> None:
        handler = previous[signum]
        if handler == signal.SIG_IGN:
            return
        stopped.append(signum)
        if callable(handler):
            handler(signum, frame)
        elif handler == signal.SIG_DFL and signum == signal.SIGINT:
            raise KeyboardInterrupt
        elif handler == signal.SIG_DFL:
            raise SystemExit(128 + signum)

    for sig in previous:
        signal.signal(sig, on_stop)
    try:
        yield stopped
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _scores(df, where: context.StepSamples, shas: list[str], labeler: str) -> list[float | None]:
    """Each completion's mean score over its ratings at this step that were given for its text.
    labels.read has checked every score against the run's scale; a score that is still not a finite
    number (a reader that changed, a frame from elsewhere) is no score, never a reward of inf or NaN."""
    df = df[(df["step"] == where.step) & df["score"].notna()]
    df = df[np.isfinite(df["score"].astype("float64"))]
    if labeler:
        df = df[df["labeler"] == labeler]
    means = df.groupby(["group", "sample_idx", "completion_sha"])["score"].mean().to_dict()
    found = [means.get((*where.key(i), sha)) for i, sha in enumerate(shas)]
    return [float(v) if v is not None and math.isfinite(v) else None for v in found]
