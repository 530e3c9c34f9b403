"""A TRL run rescored with its own rewards gives back what TRL logged, to 1e-6: the rewards, because the
run keeps the call TRL made (the prompts and completions as TRL passed them, the message lists of a
conversational dataset, and every dataset column), and the advantages, because they are computed with
TRL's rule (std + 1e-4; with scale_rewards="batch", the batch's N-1 std). For the callback's run and for
the import of TRL's output folder (which keeps the messages, but no dataset column)."""

from __future__ import annotations

import importlib
import json
import re
import shutil

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
from trl.trainer.utils import nanstd

from grpo_lab.finished_runs import rescore
from grpo_lab.objective.functions import group_advantages
from grpo_lab.rundir.importers import samples as sample_columns
from grpo_lab.rundir.trl import RunDirCallback
from trainer_helpers import ROOT, read_table
from trl_chat_helpers import ROWS, run_chat
from trl_helpers import run_trl

cli = importlib.import_module("grpo_lab.rundir.import")
TOL = 1e-6
CHAT_REWARDS = "trl_chat_helpers:closeness=1,trl_chat_helpers:digit_share=0.5"  # the run's own, by module:function


@pytest.fixture(scope="module")
def chat_runs(tmp_path_factory):
    """A TRL run on a conversational dataset with a `solution` column, written by the callback, and
    its output folder imported: runs/live and runs/imported."""
    root = tmp_path_factory.mktemp("trl-chat")
    run_chat(root, "out", callbacks=[RunDirCallback(root / "runs" / "live")])
    assert cli.main([str(root / "out"), "--name", "imported", "--runs-dir", str(root / "runs")]) == 0
    return root / "runs"


@pytest.fixture(scope="module")
def batch_run(tmp_path_factory):
    """A TRL run on plain-text prompts with an `answer` column (trl_helpers), scale_rewards="batch"."""
    root = tmp_path_factory.mktemp("trl-batch")
    run_trl(root, "out", callbacks=[RunDirCallback(root / "runs" / "live")], scale_rewards="batch",
            eval_strategy="no")
    return root / "runs" / "live"


def by_sample(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["step", "group", "sample_idx"]).reset_index(drop=True)


def rescored(run, spec: str, name: str) -> tuple[pd.DataFrame, dict]:
    result = rescore.rescore(run, rescore.parse_request(spec, name=name))
    return by_sample(result.samples), result.summary


def assert_gives_back_the_run(got: pd.DataFrame, summary: dict) -> None:
    """Every reward and advantage the rescore gives is the run's (TRL's logged ones) to 1e-6."""
    assert not any(summary["errors"].values()), summary["first_error"]
    reward, logged = got["reward"].to_numpy(float), got["run_reward"].to_numpy(float)
    assert (np.isnan(reward) == np.isnan(logged)).all()
    assert np.nanmax(np.abs(reward - logged)) <= TOL
    assert np.abs(got["advantage"].to_numpy() - got["run_advantage"].to_numpy()).max() <= TOL
    assert summary["reward_changed"] == 0 and summary["sign_flips"]["samples"] == 0


def chapter_rule_gap(got: pd.DataFrame, std_mode: str) -> float:
    """How far this project's rule (no epsilon, population batch std) is from TRL's logged advantages:
    what the test would miss if the run's own rule were not used."""
    gaps = []
    for _, part in got.groupby("step"):
        adv, _ = rescore.step_advantages(part.assign(dropped=False), part["run_reward"].to_numpy(float), std_mode)
        gaps.append(np.abs(adv - part["run_advantage"].to_numpy()).max())
    return float(max(gaps))


# --- the callback's run -----------------------------------------------------------------------


def test_the_callback_keeps_the_reward_call_trl_made(chat_runs):
    samples = by_sample(read_table(chat_runs / "live", "samples"))
    assert len(samples) == 24
    completions = [json.loads(v) for v in samples["source_completion"]]
    assert all(c[0]["role"] == "assistant" for c in completions)  # the message list TRL passed
    assert [sample_columns.text(c) for c in completions] == samples["completion"].tolist()
    prompts = [json.loads(v) for v in samples["source_prompt"]]
    assert all(p in [r["prompt"] for r in ROWS] for p in prompts)
    sums = [str(int(p[-1]["content"][0]) + int(p[-1]["content"][2])) for p in prompts]
    assert [json.loads(v) for v in samples["column/solution"]] == sums  # the dataset's column, as its keyword got it
    ids = [json.loads(v) for v in samples["source_completion_ids"]]
    assert all(isinstance(i, list) and 0 < len(i) <= 6 and all(isinstance(t, int) for t in i) for i in ids)


def test_a_conversational_run_rescored_with_its_own_rewards_gives_back_trls_rewards_and_advantages(chat_runs):
    run = chat_runs / "live"
    got, summary = rescored(run, CHAT_REWARDS, "own")
    assert_gives_back_the_run(got, summary)
    logged = by_sample(read_table(run, "samples"))
    for theirs, ours in (("closeness", "trl_chat_helpers:closeness"), ("digit_share", "trl_chat_helpers:digit_share")):
        np.testing.assert_allclose(got[f"rewards/{ours}"].to_numpy(float), logged[f"rewards/{theirs}"].to_numpy(float),
                                   atol=TOL, err_msg=theirs)  # NaN where TRL's None, both sides
    assert got["rewards/trl_chat_helpers:digit_share"].isna().any()  # the None rule was exercised
    assert got.groupby(["step", "group"])["reward"].nunique().gt(1).all()  # every group has a spread to divide by
    assert summary["advantage_rule"] == {"std_mode": "sample", "epsilon": 1e-4, "batch_ddof": 1,
                                       "dtype": "float32"}
    assert chapter_rule_gap(got, "sample") > 1e-5  # without TRL's epsilon the advantages would not come back


def test_a_plain_text_run_with_batch_scaling_gives_back_trls_rewards_and_advantages(batch_run):
    samples = read_table(batch_run, "samples")
    assert (samples["source_prompt"].map(json.loads) == samples["prompt"]).all()  # a plain prompt: its string
    sums = samples["prompt"].map(lambda p: str(int(p[0]) + int(p[2])))
    assert (samples["column/answer"].map(json.loads) == sums).all()  # the dataset's answer, as `answer=` got it
    got, summary = rescored(batch_run, "trl_helpers:correct=1,trl_helpers:digits=1", "own")
    assert_gives_back_the_run(got, summary)
    assert summary["advantage_rule"] == {"std_mode": "batch", "epsilon": 1e-4, "batch_ddof": 1,
                                       "dtype": "float32"}
    assert chapter_rule_gap(got, "batch") > 1e-5  # the population std would not give TRL's


# --- the import of TRL's output folder -------------------------------------------------------------


def test_the_import_keeps_the_messages_and_rescored_gives_back_trls(chat_runs):
    imported = by_sample(read_table(chat_runs / "imported", "samples"))
    live = by_sample(read_table(chat_runs / "live", "samples"))
    for column in ("source_prompt", "source_completion"):
        assert imported[column].map(json.loads).tolist() == live[column].map(json.loads).tolist(), column
    assert not [c for c in imported.columns if c.startswith(sample_columns.COLUMN_PREFIX)]  # TRL logs no dataset column
    # the same scores as closeness, the solution read from the prompt's message
    got, summary = rescored(chat_runs / "imported", "trl_chat_helpers:closeness_from_prompt=1,"
                                                    "trl_chat_helpers:digit_share=0.5", "own")
    assert_gives_back_the_run(got, summary)
    with pytest.raises(rescore.RescoreError, match=r"^rewards: reward 'trl_chat_helpers:closeness' cannot take the "
                                                   r"trainer's call .*'solution'"):
        rescore.rescore(chat_runs / "imported", rescore.parse_request(CHAT_REWARDS, name="needs-solution"))


# --- the pieces --------------------------------------------------------------------------------------


def trl_advantages(rewards: torch.Tensor, scale_rewards: str) -> torch.Tensor:
    """TRL 1.16's sum_then_normalize advantages, as grpo_trainer.py computes them (its nanstd), float32."""
    mean = torch.nanmean(rewards, dim=1, keepdim=True)
    std = nanstd(rewards, dim=1, keepdim=True) if scale_rewards == "group" else nanstd(rewards).expand_as(mean)
    return torch.nan_to_num((rewards - mean) / (std + 1e-4), nan=0.0)


@pytest.mark.parametrize("scale_rewards, std_mode", [("group", "sample"), ("batch", "batch")])
def test_group_advantages_with_trls_options_is_trls_rule(scale_rewards, std_mode):
    rewards = torch.tensor([[0.2, 0.7, float("nan"), 0.3], [1.0, 1.0, 1.0, 1.0], [float("nan")] * 3 + [0.5],
                            [0.123, 0.1231, 0.1229, 0.123]], dtype=torch.float32)  # the last: a tiny spread, not 0
    ours = group_advantages(rewards, std_mode, epsilon=1e-4, batch_ddof=1, dtype=torch.float32).advantages
    torch.testing.assert_close(ours, trl_advantages(rewards, scale_rewards), atol=TOL, rtol=0)
    if scale_rewards == "group":  # the last group's spread is a few float32 steps: float64 would be 1e-5 off TRL's
        assert (group_advantages(rewards, std_mode, epsilon=1e-4, batch_ddof=1).advantages - ours).abs().max() > TOL


def test_reward_inputs_read_the_kept_call_and_fall_back_without_it():
    answers = [[{"role": "assistant", "content": "2"}], [{"role": "assistant", "content": "3"}]]
    call = sample_columns.reward_call_columns([[{"role": "user", "content": "1+1="}]] * 2, answers,
                                              {"solution": ["2", "2"], "meta": [{"k": 1}, None]}, [[5], [6, 7]])
    rows = pd.DataFrame({"prompt": ["user: 1+1="] * 2, "completion": ["assistant: 2", "assistant: 3"],
                         "answer": ["2", "2"], "turns": [None, None], **{k: v.to_pylist() for k, v in call.items()}})
    prompts, completions, columns = rescore.reward_inputs(rows, {"source": "trl"})
    assert completions[1][0]["content"] == "3" and prompts[0][0]["role"] == "user"
    assert columns == {"solution": ["2", "2"], "meta": [{"k": 1}, None]}  # exactly the dataset's: no answer alias
    assert rescore.completion_ids(rows) == [[5], [6, 7]]
    assert rescore.logged_columns(rows, {"source": "trl"}) == ["solution", "meta"]
    older = rows.assign(source_prompt=[None, None])  # a step written without the call: the text columns, as before
    assert rescore.reward_inputs(older, {"source": "trl"}) == (["user: 1+1="] * 2, ["assistant: 2", "assistant: 3"],
                                                               {"answer": ["2", "2"], "solution": ["2", "2"]})


def test_a_planted_kept_call_is_one_line(batch_run, tmp_path):
    run = tmp_path / "planted"
    shutil.copytree(batch_run, run, ignore=shutil.ignore_patterns("rescores"))
    part = sorted((run / "tables" / "samples").glob("*.parquet"))[0]
    table = pq.read_table(part).to_pandas()
    table.loc[0, "source_completion"] = "[" * 100_000
    table.to_parquet(part)
    with pytest.raises(rescore.RescoreError, match=r"^samples column source_completion is not valid JSON|"
                                                   r"^samples column source_completion is nested deeper"):
        rescore.rescore(run, rescore.parse_request("trl_helpers:digits", name="planted"))
    assert not (run / "rescores" / "planted").exists()


@pytest.mark.parametrize("value", ["x", -1, 2.0, True])
def test_a_planted_advantage_epsilon_is_one_line(value):
    with pytest.raises(rescore.RescoreError, match=r"^run r: advantage_epsilon .* is not a number from 0 to 1$"):
        rescore.advantage_rule({"advantage_epsilon": value}, "r")


def test_every_samples_column_the_callback_and_the_import_write_is_documented(chat_runs):
    """docs/run-directory.md's tables/samples section names each column (a `prefix/<name>` row: its family)."""
    text = (ROOT / "docs" / "run-directory.md").read_text()
    section = text[text.index("## tables/samples"):text.index("## tables/histograms")]
    documented = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            documented |= {name.split("<")[0] for name in re.findall(r"`([^`]+)`", line.split("|")[1])}
    for run in ("live", "imported"):
        for column in read_table(chat_runs / run, "samples").columns:
            family = column.split("/")[0] + "/" if "/" in column else column
            assert column in documented or family in documented, f"{run}: {column}"
