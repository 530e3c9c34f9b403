"""grpo-lab-rescore: a run's completions scored again without training. The run's own rewards give back
its rewards and advantages exactly; another reward gives the advantages `group_advantages` gives for it;
bad input is one line, exit 2, and nothing written."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from grpo_lab.finished_runs import rescore
from grpo_lab.rundir import rescores
from grpo_lab.objective.functions import group_advantages
from run_sources import verl_run, write_verl_dump  # noqa: F401 (verl_run: a fixture, one per module)
from trainer_helpers import read_table

cli = __import__("importlib").import_module("grpo_lab.rundir.import")


def by_sample(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["step", "group", "sample_idx"]).reset_index(drop=True)


def expected_advantages(table: pd.DataFrame, std_mode: str) -> np.ndarray:
    """group_advantages of each step's (N, G) rewards, called here directly (float32 totals, as the trainer's)."""
    out = []
    for _, step in table.groupby("step", sort=True):
        matrix = torch.tensor(step.pivot(index="group", columns="sample_idx", values="reward").to_numpy(np.float64),
                              dtype=torch.float32)
        out.append(group_advantages(matrix, std_mode).advantages.flatten().numpy())
    return np.concatenate(out)


def test_own_rewards_reproduce_the_run_and_another_reward_its_group_advantages(tiny_run, tmp_path):
    # length past 2 characters costs 0.01 each: totals such as 0.995 that float32 cannot hold exactly
    (tmp_path / "rewards.yaml").write_text("rewards: {correctness: 1, length: 0.5}\n"
                                           "reward_params: {length: {max_len: 2}}\n")
    run = tiny_run(max_steps=3, config=tmp_path / "rewards.yaml", max_new_tokens=6)
    logged = by_sample(read_table(run, "samples"))
    assert logged["rewards/length"].nunique() > 1  # the run's own length reward varies: the check below means something

    # the spec alone: the run's reward_params (length's max_len 2) come from its config.json
    own = rescore.rescore(run, rescore.parse_request("correctness=1,length=0.5", name="own",
                                                     run_config=json.loads((run / "config.json").read_text())))
    got = by_sample(pd.read_parquet(run / "rescores" / "own" / "samples.parquet"))
    for column in ("reward", "advantage", "rewards/correctness", "rewards/length"):
        np.testing.assert_array_equal(got[column].to_numpy(float), logged[column].to_numpy(float), err_msg=column)
    assert own.summary["reward_changed"] == 0 and own.summary["sign_flips"]["groups"] == 0
    assert own.summary["signal"]["gained"] == own.summary["signal"]["lost"] == 0

    # length alone, penalising every character past the first: a spread in most groups, where
    # correctness (mostly 0 on a 3-step run) had little
    other = rescore.rescore(run, rescore.parse_request("length", params={"length": {"max_len": 1}}, name="short"))
    got = by_sample(other.samples)
    assert (got["reward"] < 0).any() and (got["reward"] != logged["reward"]).any()
    np.testing.assert_array_equal(got["advantage"].to_numpy(), expected_advantages(got, "group"))
    assert other.summary["reward_changed"] == int((got["reward"] != logged["reward"]).sum())
    zero_before = logged.groupby(["step", "group"])["advantage"].apply(lambda a: bool((a == 0).all()))
    zero_after = got.groupby(["step", "group"])["advantage"].apply(lambda a: bool((a == 0).all()))
    assert other.summary["signal"]["gained"] == int((zero_before & ~zero_after).sum())
    assert other.summary["signal"]["lost"] == int((~zero_before & zero_after).sum())
    summary = json.loads((run / "rescores" / "short" / "summary.json").read_text())
    assert summary["rewards"] == {"length": 1.0} and summary["reward_params"] == {"length": {"max_len": 1}}
    assert rescores.list_rescores(run) == ["short", "own"]


def test_an_imported_run_rescored_with_a_user_function_gets_its_group_advantages(verl_run):
    logged = by_sample(read_table(verl_run, "samples"))
    # trl_helpers.correct reads `answer`: the import's `gts`, logged as answer
    result = rescore.rescore(verl_run, rescore.parse_request("trl_helpers:correct", name="starts"))
    got = by_sample(result.samples)
    expected = [1.0 if c.strip().startswith(a) else 0.0 for c, a in zip(logged["completion"], logged["answer"])]
    assert got["reward"].tolist() == expected
    np.testing.assert_array_equal(got["advantage"].to_numpy(), expected_advantages(got, "sample"))
    np.testing.assert_array_equal(got["run_advantage"].to_numpy(), logged["advantage"].to_numpy())
    assert result.summary["std_mode"] == "sample" and result.summary["samples"] == len(logged)


def test_std_mode_batch_takes_the_std_over_the_trained_groups_only():
    rows = pd.DataFrame({"group": [0, 0, 1, 1, 2, 2], "sample_idx": [0, 1] * 3,
                         "dropped": [False, False, False, False, True, True]})
    totals = np.array([1.0, 0.0, 3.0, 3.0, 5.0, 9.0])
    adv, zero = rescore.step_advantages(rows, totals, "batch")
    kept = group_advantages(torch.tensor([[1.0, 0.0], [3.0, 3.0]]), "batch")
    assert adv[:4].tolist() == pytest.approx(kept.advantages.flatten().tolist())
    assert adv[4:].tolist() == pytest.approx(group_advantages(torch.tensor([[5.0, 9.0]]), "batch").advantages[0].tolist())
    assert zero == {0: False, 1: True, 2: False}


def test_a_none_reward_is_unscored_and_changed_but_not_a_flip():
    before, after = np.array([1.0, 0.5, math.nan, 2.0]), np.array([1.0 + 1e-9, math.nan, 0.0, 3.0])
    assert rescore._changed(before, after).tolist() == [False, True, True, True]


@pytest.mark.parametrize("args, says", [
    (["--rewards", "nope"], "unknown reward 'nope'"),
    (["--rewards", "correctness=abc"], "weight of 'correctness' must be a number"),
    (["--rewards", "correctness", "--reward-weights", "1,2"], "one weight per reward"),
    (["--rewards", "code_tests"], "reads the 'tests' column"),
    (["--rewards", "correctness", "--name", "../out"], "--name"),
    (["--rewards", "correctness", "--name", "taken"], "exists in run verl"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(verl_run, capsys, args, says):
    (verl_run / "rescores" / "taken").mkdir(parents=True, exist_ok=True)
    before = sorted(p.name for p in (verl_run / "rescores").iterdir())
    assert rescore.main([str(verl_run), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in (verl_run / "rescores").iterdir()) == before


def test_a_reward_whose_signature_cannot_take_the_call_is_refused(verl_run, tmp_path, monkeypatch, capsys):
    (tmp_path / "bad_rewards.py").write_text("def positional(completion, solution):\n    return [0.0]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert rescore.main([str(verl_run), "--rewards", "bad_rewards:positional", "--name", "bad"]) == 2
    assert "cannot take the trainer's call" in capsys.readouterr().err
    assert not (verl_run / "rescores" / "bad").exists()


def test_a_run_without_completions_is_refused(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text(json.dumps({"std_mode": "group"}))
    assert rescore.main([str(tmp_path / "empty"), "--rewards", "length"]) == 2
    assert "no completions to score" in capsys.readouterr().err
    assert not (tmp_path / "empty" / "rescores").exists()


def test_force_replaces_a_rescore_whole(verl_run):
    first = rescore.rescore(verl_run, rescore.parse_request("length", name="again"))
    second = rescore.rescore(verl_run, rescore.parse_request("trl_helpers:correct", name="again"), force=True)
    assert first.summary["rewards"] != second.summary["rewards"]
    assert rescores.read_summary(verl_run, "again")["rewards"] == {"trl_helpers:correct": 1.0}
    assert [p.name for p in (verl_run / "rescores").iterdir() if p.name.startswith(".tmp")] == []
    group = rescores.read_group(verl_run, "again", 1, 0)
    assert group["sample_idx"].tolist() == sorted(group["sample_idx"]) and len(group) > 0


# --- the Groups page -----------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_groups_page_shows_a_rescore_beside_the_run_and_starts_one(verl_run, monkeypatch, lang):
    from app_helpers import html_bodies, open_page, texts
    from grpo_lab.dashboard import i18n
    from grpo_lab.dashboard.views.groups import rescore_view

    translate = lambda key, lang: i18n.texts(lang)[key]  # noqa: E731

    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(verl_run.parent))
    monkeypatch.delenv("GRPO_LAB_REWARD_MODULES", raising=False)
    rescore.rescore(verl_run, rescore.parse_request("length", params={"length": {"max_len": 1}}, name=f"shown-{lang}"),
                    force=True)
    at = open_page("groups", run="verl", lang=lang)
    assert at.selectbox(key=rescore_view.PICK_KEY).value == f"shown-{lang}"  # the newest
    assert 'class="grpo-rescore"' in html_bodies(at) and translate("rescore.col.a", lang) in html_bodies(at)
    assert translate("rescore.changed", lang) in [m.label for m in at.metric]

    # a module:function reward outside GRPO_LAB_REWARD_MODULES is refused, nothing written
    at.text_input(key="rescore_spec").set_value("trl_helpers:correct")
    at.text_input(key="rescore_name").set_value(f"form-{lang}")
    next(b for b in at.button if b.label == translate("rescore.start", lang)).click()
    at.run(timeout=120)
    assert "GRPO_LAB_REWARD_MODULES" in texts(at.error) and not (verl_run / "rescores" / f"form-{lang}").exists()

    monkeypatch.setenv("GRPO_LAB_REWARD_MODULES", "trl_helpers")
    next(b for b in at.button if b.label == translate("rescore.start", lang)).click()
    at.run(timeout=120)
    assert not at.exception and not at.error, texts(at.error)
    assert at.selectbox(key=rescore_view.PICK_KEY).value == f"form-{lang}"  # the new one is shown
    assert rescores.read_summary(verl_run, f"form-{lang}")["rewards"] == {"trl_helpers:correct": 1.0}


def test_rewards_read_the_logged_answer_by_the_source_s_name_and_the_tool_calls_from_turns():
    turns = json.dumps([{"model": "calc 2+3=", "tool": "calculator", "arguments": {"": "2+3"}, "result": "5",
                         "seconds": 0.01, "error": None}, {"model": " 5"}])
    rows = pd.DataFrame({"prompt": ["2+3="], "completion": ["calc 2+3=5 5"], "answer": ["5"], "turns": [turns]})
    prompts, completions, columns = rescore.reward_inputs(rows, {"source": "trl", "tools": "calculator"})
    assert (prompts, completions) == (["2+3="], ["calc 2+3=5 5"])
    assert columns["answer"] == columns["solution"] == ["5"]  # TRL's rewards read `solution`
    assert columns["tool_calls"] == [[{"name": "calculator", "arguments": {"expression": "2+3"}, "result": "5",
                                       "error": None, "seconds": 0.01}]]
    _, _, plain = rescore.reward_inputs(rows.assign(turns=None, answer=None), {})
    assert plain == {}  # nothing logged: no column, so a reward that needs one is refused (check_inputs)
