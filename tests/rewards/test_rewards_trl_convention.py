"""Rewards are called as TRL 1.16's GRPOTrainer calls them: by keyword, with
conversational completions for a conversational prompt, every dataset column, completion_ids,
trainer_state, log_extra and log_metric. Pure functions here; tests/trainer/test_reward_dry_run.py runs
the trainer."""

import json
import math
import sys
import textwrap

import pytest

from grpo_lab import rewards
from grpo_lab.rundir import metrics
from grpo_lab.trainer import doctor
from grpo_lab.trainer.records import extra_columns, reference
from grpo_lab.trainer.scoring import reward_inputs

trl_rewards = pytest.importorskip("trl.rewards")
pytest.importorskip("math_verify")

CHAT = [{"role": "user", "content": "What is 1/3 as a fraction?"}]


def assistant(text):
    return [{"role": "assistant", "content": text}]


# --- TRL's own reward functions, unchanged ---------------------------------------------------


def test_trls_rewards_score_a_conversational_batch_and_log_their_columns():
    fns = {
        "accuracy": (rewards.build("trl.rewards:accuracy_reward"), 1.0),
        "think": (rewards.build("trl.rewards:think_format_reward"), 0.5),
        "overlong": (rewards.build("trl.rewards:get_soft_overlong_punishment", max_completion_len=10,
                                   soft_punish_cache=4), 1.0),
        "cosine": (rewards.build("trl.rewards:get_cosine_scaled_reward", max_len=10), 1.0),
    }
    completions = [assistant(r"<think>easy</think> \boxed{\frac{1}{3}}"), assistant(r"\boxed{\frac{1}{2}}")]
    scores = rewards.score_all(fns, [CHAT, CHAT], completions, {"solution": [r"\frac{1}{3}", r"\frac{1}{3}"]},
                               completion_ids=[[1] * 5, [1] * 8])
    assert scores.errors == {"accuracy": 0, "think": 0, "overlong": 0, "cosine": 0}, scores.messages
    assert scores.per_reward["accuracy"] == [1.0, 0.0]
    assert scores.per_reward["think"] == [1.0, 0.0]
    assert scores.per_reward["overlong"] == [0.0, -0.5]  # 8 tokens: 2 into the 4-token cache of 10
    assert scores.per_reward["cosine"] == [pytest.approx(0.75), pytest.approx(-0.5 - 0.5 * 0.5 * (1 + math.cos(0.8 * math.pi)))]
    assert scores.extra["solution"] == [r"\frac{1}{3}"] * 2
    assert scores.extra["answer_parsed"][1] != "[unparseable]" and len(scores.extra["gold_parsed"]) == 2


def test_a_factory_is_called_once_with_its_params_and_says_what_it_needs():
    assert rewards.build("trl.rewards:get_cosine_scaled_reward", max_len=64).__name__ == "cosine_scaled_reward"
    with pytest.raises(ValueError, match=r"missing required parameter\(s\) max_len \(it takes none of prompts"):
        rewards.build("trl.rewards:get_cosine_scaled_reward")
    with pytest.raises(ValueError, match="the factory raised ValueError: max_penalty 1 should not be positive"):
        rewards.build("trl.rewards:get_repetition_penalty_reward", max_penalty=1)


# --- the call ---------------------------------------------------------------------------------


def test_every_keyword_trl_passes_reaches_the_reward():
    seen = {}

    def spy(prompts, completions, completion_ids, trainer_state, solution, level, **kwargs):
        seen.update(prompts=prompts, completions=completions, ids=completion_ids, step=trainer_state["global_step"],
                    solution=solution, level=level, rest=sorted(kwargs))
        return [0.0] * len(completions)

    rewards.score_all({"spy": (spy, 1.0)}, [CHAT], [assistant("x")], {"solution": ["1"], "level": [3]},
                      completion_ids=[[5, 6]], trainer_state={"global_step": 4})
    assert seen == {"prompts": [CHAT], "completions": [assistant("x")], "ids": [[5, 6]], "step": 4,
                    "solution": ["1"], "level": [3], "rest": ["log_extra", "log_metric"]}


def test_a_column_named_like_a_call_argument_does_not_collide():
    fn = lambda prompts, completions, **kw: [1.0] * len(completions)  # noqa: E731
    scores = rewards.score_all({"f": (fn, 1.0)}, ["p"], ["c"], {"completions": ["oops"], "log_extra": [1]})
    assert scores.errors == {"f": 0} and scores.total == [1.0]


def test_a_positional_reward_with_other_names_still_works():
    scores = rewards.score_all({"r": (lambda p, c, **k: [len(c[0])], 1.0)}, ["p"], ["abc"], {})
    assert scores.total == [3.0] and scores.errors == {"r": 0}


def test_a_wrong_signature_fails_every_sample_once_with_the_fix():
    def bad(completion, answer):  # TRL would fail too: no `completions`, no **kwargs
        return [1.0]

    scores = rewards.score_all({"bad": (bad, 1.0)}, ["p"] * 3, ["c"] * 3, {"answer": ["1"] * 3})
    assert scores.per_reward["bad"] == [None] * 3 and scores.errors == {"bad": 3}
    assert scores.messages == [scores.first_error["bad"]]  # one line, not one per sample
    message = scores.messages[0]
    assert message.startswith("reward 'bad' failed on every sample: TypeError: ")
    assert message.endswith("called with prompts, completions, completion_ids, answer, trainer_state, log_extra, "
                            "log_metric; takes (completion, answer)")


def test_log_extra_and_log_metric_keep_one_value_per_sample_through_the_retry():
    calls = []

    def picky(prompts, completions, log_extra, log_metric, **kw):
        calls.append(len(completions))
        log_extra("seen", [c.upper() for c in completions])
        log_metric("calls", 1.0)
        if "boom" in completions:
            raise ValueError("boom")
        return [1.0] * len(completions)

    scores = rewards.score_all({"picky": (picky, 1.0)}, ["p"] * 3, ["a", "boom", "c"], {})
    assert calls == [3, 1, 1, 1]  # the batch call raised: retried one sample at a time
    assert scores.per_reward["picky"] == [1.0, None, 1.0]
    assert scores.extra == {"seen": ["A", "BOOM", "C"]}  # each sample's value at its own place
    assert scores.logged == {"calls": [1.0] * 4} and scores.metrics()["rewards/log/calls"] == 1.0


def test_a_log_extra_of_the_wrong_length_is_reported_not_stored():
    def short(prompts, completions, log_extra, **kw):
        log_extra("why", ["only one"])
        return [0.0] * len(completions)

    scores = rewards.score_all({"short": (short, 1.0)}, ["p"] * 2, ["a", "b"], {})
    assert scores.extra == {} and scores.errors == {"short": 0}
    assert scores.messages == ["reward 'short': log_extra('why') got 1 values for 2 samples; not logged"]


# --- the trainer's side ----------------------------------------------------------------------


def test_reward_inputs_are_the_datasets_prompt_conversational_completions_and_every_column():
    rows = [{"prompt_id": "1", "prompt": "rendered 1+1=", "source_prompt": CHAT, "solution": "2", "level": 1},
            {"prompt_id": "2", "prompt": "2+2=", "solution": "4", "level": 2}]  # a plain-text row
    prompts, completions, columns = reward_inputs(rows, ["a", "b", "c", "d"], per_prompt=2)
    assert prompts == [CHAT, CHAT, "2+2=", "2+2="]
    assert completions == [assistant("a"), assistant("b"), "c", "d"]
    assert columns == {"solution": ["2", "2", "4", "4"], "level": [1, 1, 2, 2]}


def test_the_samples_table_keeps_the_reference_and_fixes_each_extra_columns_type():
    assert reference({"solution": 7}) == "7" and reference({"answer": "1", "solution": "2"}) == "1"
    assert reference({"ground_truth": "x"}) == "x" and reference({"prompt": "p"}) is None
    kinds = {}
    first = extra_columns({"acc": [1.0, None], "why": ["a", 2.0]}, kinds)
    assert first == {"extra/acc": [1.0, None], "extra/why": ["a", "2"]}
    later = extra_columns({"acc": ["0.5", "n/a"], "why": [3.0, None]}, kinds)  # the types stay the run's
    assert later == {"extra/acc": [0.5, None], "extra/why": ["3", None]}


def test_the_registry_names_logged_metrics_and_live_draws_them_by_the_reward():
    from grpo_lab.dashboard.views import metrics as panels

    assert "rewards/log/<name>" not in metrics.names("grpo", ["r"])
    written = metrics.names("grpo", ["r"], logged=("kl_hint",))
    assert "rewards/log/kl_hint" in written
    drawn = panels.panels(sorted(written))
    assert drawn[0].metrics == ("reward/mean", "rewards/r/mean")  # not rewards/log/*
    assert drawn[1].metrics == ("rewards/log/kl_hint",) and drawn[1].section == "overview"


# --- the run doctor --------------------------------------------------------------------------


def step_metrics(**over):
    return {"reward/mean": math.nan, "rewards/acc/none_frac": 1.0, "rewards/acc/errors": 16.0, **over}


def test_a_reward_failing_on_every_sample_is_critical_with_the_fix():
    note = ("reward 'acc' failed on every sample: TypeError: missing a required argument: 'answer': called with "
            "prompts, completions; takes (completions, answer)")
    found = doctor.Doctor(lr=1e-3, max_grad_norm=1.0, pretrained=False, vocab_size=40, trained_params=1).check(
        1, step_metrics(), reward_notes={"acc": note})
    assert [(f.kind, f.severity) for f in found] == [("reward_failed", "critical"), ("reward_unscored", "critical")]
    assert "failed on every completion (16 failures)" in found[0].message and note in found[0].message
    assert found[0].suggestion.startswith("called with prompts, completions; takes (completions, answer): ")
    assert doctor.stops(found[0], "critical")


def test_none_without_errors_is_not_a_failing_reward_and_scored_steps_are_quiet():
    d = doctor.Doctor(lr=1e-3, max_grad_norm=1.0, pretrained=False, vocab_size=40, trained_params=1)
    assert [f.kind for f in d.check(1, step_metrics(**{"rewards/acc/errors": 0.0}))] == ["reward_unscored"]
    d = doctor.Doctor(lr=1e-3, max_grad_norm=1.0, pretrained=False, vocab_size=40, trained_params=1)
    assert d.check(1, step_metrics(**{"reward/mean": 0.5, "rewards/acc/none_frac": 0.5})) == []


# --- task files --------------------------------------------------------------------------------


def test_a_conversational_jsonl_keeps_every_column_and_its_messages(tmp_path):
    from grpo_lab.trainer import tiny
    from grpo_lab.trainer.data import load_task_rows
    from grpo_lab.trainer.tasks import Task, render

    path = tmp_path / "sums.jsonl"
    path.write_text(json.dumps({"prompt": [{"role": "user", "content": "1+2="}], "solution": "3", "level": 1}) + "\n")
    rows = load_task_rows(str(path), {})
    assert rows == [{"prompt": [{"role": "user", "content": "1+2="}], "solution": "3", "level": 1, "prompt_id": "1"}]
    # the tiny model has no chat template: the model reads the messages' text, the rewards the messages
    shown = render(Task("sums", rows), tiny.build_tokenizer(), "auto").rows[0]
    assert shown["prompt"] == "1+2=" and shown["source_prompt"] == [{"role": "user", "content": "1+2="}]


def test_the_dry_run_refuses_a_signature_and_only_warns_about_a_rewards_own_failure(tmp_path, monkeypatch):
    from grpo_lab.trainer.config import ConfigError, from_dict
    from grpo_lab.trainer.setup import dry_run
    from grpo_lab.trainer.tasks import arithmetic

    (tmp_path / "dry_rewards.py").write_text(textwrap.dedent('''
        def positional(completions, solution):
            return [0.0] * len(completions)

        def inner(**kwargs):
            return helper(kwargs["completions"], extra=1)

        def helper(completions):
            return [0.0] * len(completions)

        def own_bug(completions, **kwargs):
            return [1 / 0 for _ in completions]
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        cfg = from_dict({"runs_dir": str(tmp_path), "name": "r"})
        task = arithmetic(2)
        with pytest.raises(ConfigError) as info:
            dry_run(cfg, {"dry_rewards:positional": (rewards.build("dry_rewards:positional"), 1.0)}, task)
        line = str(info.value)
        assert "\n" not in line and line.startswith("rewards: reward 'dry_rewards:positional' cannot take the trainer's")
        assert line.endswith("called with prompts, completions, completion_ids, answer, trainer_state, log_extra, "
                             "log_metric; takes (completions, solution)")
        with pytest.raises(ConfigError, match="unexpected keyword argument 'extra'"):  # an inner call's signature
            dry_run(cfg, {"inner": (rewards.build("dry_rewards:inner"), 1.0)}, task)
        warned = dry_run(cfg, {"own": (rewards.build("dry_rewards:own_bug"), 1.0)}, task)
        assert warned == ["reward 'own' raised ZeroDivisionError on a dry run with a dummy completion: "
                          "division by zero"]
    finally:
        sys.modules.pop("dry_rewards", None)


def test_dynamic_samplings_regrouping_keeps_extras_aligned_and_metrics_once():
    from grpo_lab.trainer.batch import join_scores, pick_scores

    one = rewards.Scores(total=[1.0, 0.0], per_reward={"r": [1.0, 0.0]}, errors={"r": 1},
                         extra={"why": ["a", "b"]}, logged={"m": [2.0]})
    two = rewards.Scores(total=[3.0], per_reward={"r": [3.0]}, errors={"r": 0}, logged={"m": [4.0]})
    picked = pick_scores(one, [1])
    assert picked.extra == {"why": ["b"]} and picked.logged == {} and picked.errors == {}
    joined = join_scores([one, two], [2, 1])
    assert joined.extra == {"why": ["a", "b", None]} and joined.logged == {"m": [2.0, 4.0]}
    assert joined.errors == {"r": 1} and joined.total == [1.0, 0.0, 3.0]
