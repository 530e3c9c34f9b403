"""The prompts of a step: distinct while the task has enough, every prompt once per epoch, a
function of (seed, step) only (so a resumed run draws the same), repeats only when it must."""

from collections import Counter

from grpo_lab.trainer.tasks import Task, arithmetic


def test_a_step_draws_distinct_prompts_and_an_epoch_sees_each_once():
    task = arithmetic(5)  # 36 prompts
    steps = [task.batch(step, 8, seed=3) for step in range(1, 5)]  # one epoch: 36 // 8 = 4 steps
    for rows in steps:
        assert len({r["prompt_id"] for r in rows}) == 8
    seen = Counter(r["prompt_id"] for rows in steps for r in rows)
    assert len(seen) == 32 and set(seen.values()) == {1}  # 4 sit this epoch out (drop_last)
    assert {r["prompt_id"] for r in task.batch(5, 8, seed=3)} != {r["prompt_id"] for r in steps[0]}


def test_draws_depend_on_seed_and_step_only():
    task = arithmetic(5)
    assert task.batch(7, 32, seed=1) == arithmetic(5).batch(7, 32, seed=1)  # a resumed run: same prompts
    assert task.batch(7, 32, seed=1) != task.batch(7, 32, seed=2)


def test_a_task_smaller_than_a_step_repeats_prompts_evenly():
    task = Task("three", [{"prompt_id": str(i), "prompt": f"p{i}"} for i in range(3)])
    rows = task.batch(1, 7, seed=0)
    counts = Counter(r["prompt_id"] for r in rows)
    assert len(rows) == 7 and set(counts) == {"0", "1", "2"} and max(counts.values()) - min(counts.values()) <= 1
