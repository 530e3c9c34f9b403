"""`async def` reward functions are awaited, as TRL 1.16's GRPOTrainer awaits them:
every score real, several async rewards of one step awaited together, from any thread."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor

from grpo_lab import rewards
from trainer_helpers import ROOT, SMALL, read_table, trainer_cmd


# TRL's docs, "Example 5: Asynchronous reward functions" (docs/source/grpo_trainer.md), unchanged.
async def async_reward_func(prompts, completions, **kwargs):
    # Simulate an I/O-bound call (e.g., HTTP request, database lookup)
    await asyncio.sleep(0.01)
    # Simple toy reward: 1.0 if the completion is non-empty, else 0.0
    return [1.0 if completion else 0.0 for completion in completions]


def test_trls_documented_async_reward_gives_real_scores():
    scores = rewards.score_all({"async_reward_func": (async_reward_func, 1.0)}, ["a", "b", "c"], ["x", "", "y"], {})
    assert scores.per_reward["async_reward_func"] == [1.0, 0.0, 1.0], scores.messages
    assert scores.errors == {"async_reward_func": 0} and scores.total == [1.0, 0.0, 1.0]


def test_several_async_rewards_of_one_batch_run_at_once():
    """Each waits for the other to have started: awaited one after the other, the first would time
    out (and score None); gathered, as TRL gathers them, both score."""
    started = {}

    def waiting_for(me: str, other: str):
        async def reward(completions, **kwargs):
            started.setdefault(me, asyncio.Event()).set()
            other_started = started.setdefault(other, asyncio.Event())
            await asyncio.wait_for(other_started.wait(), timeout=5)
            return [len(me)] * len(completions)
        return reward

    fns = {"ab": (waiting_for("ab", "xyz"), 1.0), "xyz": (waiting_for("xyz", "ab"), 1.0),
           "plain": (lambda completions, **kw: [0.5] * len(completions), 2.0)}
    scores = rewards.score_all(fns, ["p", "q"], ["c", "d"], {})
    assert scores.per_reward == {"ab": [2.0, 2.0], "xyz": [3.0, 3.0], "plain": [0.5, 0.5]}, scores.messages
    assert scores.total == [6.0, 6.0]


def test_an_async_reward_logs_extras_and_metrics_and_fails_only_its_bad_samples():
    async def picky(completions, log_extra, log_metric, **kwargs):
        await asyncio.sleep(0)
        if "boom" in completions:  # the whole-batch call fails: retried sample by sample
            raise ValueError("boom")
        log_extra("length", [len(c) for c in completions])
        log_metric("seen", len(completions))
        return [float(len(c)) for c in completions]

    scores = rewards.score_all({"picky": (picky, 1.0)}, ["p"] * 3, ["ab", "boom", "xyz"], {})
    assert scores.per_reward["picky"] == [2.0, None, 3.0] and scores.errors == {"picky": 1}
    assert scores.extra["length"] == [2.0, None, 3.0] and scores.logged["seen"] == [1.0, 1.0]


def test_async_rewards_score_from_a_worker_thread_and_from_inside_a_running_loop():
    fns = {"async_reward_func": (async_reward_func, 1.0)}
    score = lambda: rewards.score_all(fns, ["a", "b"], ["x", ""], {}).per_reward["async_reward_func"]  # noqa: E731
    with ThreadPoolExecutor(4) as pool:
        assert [f.result() for f in [pool.submit(score) for _ in range(8)]] == [[1.0, 0.0]] * 8

    async def caller():  # e.g. a notebook, whose cell already runs an event loop
        return score()

    # in a thread of its own: a session fixture of the same worker (Playwright's sync API) may hold
    # this thread's event loop, where asyncio.run itself refuses
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(asyncio.run, caller()).result() == [1.0, 0.0]
    assert threading.current_thread() is threading.main_thread()


def test_an_async_callable_object_and_a_bound_partial_are_awaited():
    class Judge:
        async def __call__(self, completions, bonus=0.0, **kwargs):
            return [1.0 + bonus for _ in completions]

    import functools

    scores = rewards.score_all({"judge": (Judge(), 1.0), "partial": (functools.partial(Judge().__call__, bonus=1.0), 1.0)},
                               ["p"], ["c"], {})
    assert scores.per_reward == {"judge": [1.0], "partial": [2.0]}, scores.messages


def test_the_trainer_awaits_an_async_reward_from_a_users_module(tmp_path):
    """The real trainer, a short run: the dry run passes and every step is scored."""
    (tmp_path / "user_async.py").write_text(textwrap.dedent('''
        import asyncio

        async def async_reward_func(prompts, completions, **kwargs):
            # Simulate an I/O-bound call (e.g., HTTP request, database lookup)
            await asyncio.sleep(0.01)
            # Simple toy reward: 1.0 if the completion is non-empty, else 0.0
            return [1.0 if completion else 0.0 for completion in completions]
    '''))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"}
    done = subprocess.run(trainer_cmd(tmp_path / "runs", "async", *SMALL, "--max-steps", "2", "--rewards",
                                      "correctness=1,user_async:async_reward_func=1"),
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "dry run" not in done.stderr and "never awaited" not in done.stderr, done.stderr[-2000:]
    samples = read_table(tmp_path / "runs" / "async", "samples")
    scored = samples["rewards/user_async:async_reward_func"]
    assert scored.notna().all() and set(scored) <= {0.0, 1.0}
    status = json.loads((tmp_path / "runs" / "async" / "status.json").read_text())
    assert status["state"] == "finished"
