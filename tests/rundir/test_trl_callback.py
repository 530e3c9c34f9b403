"""TRL's GRPOTrainer, for real, with RunDirCallback: the run directory it writes, checked against what
TRL itself computed and logged, then opened by the reader and by every training page."""

import json
import re

import pandas as pd
import pytest
import torch

from app_helpers import ROOT, live_open, open_page, texts
from grpo_lab.rundir.importers import names
from grpo_lab.rundir.reader import TableReader, read_run
from grpo_lab.rundir.trl import RunDirCallback
from grpo_lab.objective.functions import group_advantages
from trainer_helpers import read_table, start_trainer, wait_trainers
from trl_helpers import G, correct, run_trl

pytest.importorskip("trl")
NATIVE = ["--prompts-per-step", "2", "--group-size", "4", "--sft-steps", "5", "--max-steps", "3"]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A native run (in the background) and a TRL run with the callback, in one runs folder."""
    root = tmp_path_factory.mktemp("trl")
    runs = root / "runs"
    native = start_trainer(runs, "native", *NATIVE)
    trainer = run_trl(root, "trl-out", callbacks=[RunDirCallback(runs / "trl-live")])
    wait_trainers([native])
    return {"root": root, "runs": runs, "run": runs / "trl-live", "trainer": trainer}


@pytest.fixture(scope="module")
def samples(made):
    return read_table(made["run"], "samples")


def test_status_and_config_say_trl(made):
    status = json.loads((made["run"] / "status.json").read_text())
    assert status["state"] == "finished" and status["step"] == 4 and status["total_steps"] == 4
    assert status["source"] == "trl" and status["algo"] == "grpo" and status["error"] is None
    config = json.loads((made["run"] / "config.json").read_text())
    assert config["source"] == "trl" and config["advantage_source"] == "trl"
    assert {k: config[k] for k in ("group_size", "passes", "lr", "beta", "epsilon", "epsilon_high", "max_new_tokens",
                                   "std_mode", "loss_aggregation", "max_steps")} == {
        "group_size": G, "passes": 2, "lr": 1e-3, "beta": 0.04, "epsilon": 0.2, "epsilon_high": None,
        "max_new_tokens": 4, "std_mode": "sample", "loss_aggregation": "token", "max_steps": 4}
    assert config["rewards"] == {"correct": 1.0, "digits": 1.0}
    assert config["trl/num_generations"] == G and config["trl/scale_rewards"] == "group"  # every TRL option, as it was


def test_scalars_one_row_per_step_under_our_names(made):
    scalars = read_table(made["run"], "scalars")
    assert scalars["step"].tolist() == [1, 2, 3, 4]
    history: dict[int, dict] = {}
    for record in made["trainer"].state.log_history:
        if record["step"] not in history or "train_runtime" not in record:  # the end summary is not a step's
            history.setdefault(record["step"], {}).update(record)
    for _, row in scalars.iterrows():
        expected = names.metrics(history[int(row["step"])])
        assert expected and all(row[k] == pytest.approx(v, nan_ok=True) for k, v in expected.items())
    for ours in ("reward/mean", "reward/std", "rewards/correct/mean", "kl/mean", "clip/low", "clip/high", "clip/total",
                 "completion/length_mean", "entropy/mean", "grad/norm", "lr", "loss/total", "trl/num_tokens"):
        assert ours in scalars, ours
    assert not {"reward", "learning_rate", "grad_norm", "kl"} & set(scalars.columns)  # only under our names
    assert scalars.loc[scalars["step"] == 3, "trl/eval_reward"].notna().all()  # the evaluation joins its step's row
    assert scalars["clip/total"].max() > 0  # the second pass over a batch clips: a real signal, not zeros
    assert "trl/train_runtime" not in scalars  # the end-of-training summary is not a step


def test_samples_have_the_schema_and_group_identifies_groups(samples):
    assert {"step", "group", "prompt_id", "sample_idx", "prompt", "completion", "reward", "advantage",
            "rewards/correct", "rewards/digits"} <= set(samples.columns)
    assert samples["group"].dtype.kind == "i" and samples["sample_idx"].dtype.kind == "i"
    # Generated in steps 1 and 3 (num_iterations=2: steps 2 and 4 train on the same batch again).
    assert sorted(samples["step"].unique()) == [1, 3]
    for step, rows in samples.groupby("step"):
        assert sorted(rows["group"].unique()) == list(range(len(rows) // G))
    for _, rows in samples.groupby(["step", "group"]):
        assert rows["sample_idx"].tolist() == list(range(G)) and rows["prompt"].nunique() == 1
        assert rows["prompt_id"].nunique() == 1
    unscored = samples[samples["prompt"].str[0] == samples["prompt"].str[2]]
    assert unscored["rewards/digits"].isna().all() and unscored["reward"].notna().all()


def test_advantages_are_trls_own(made, samples):
    """Row for row what TRL logged (log_completions), and TRL's rule on the logged rewards.

    TRL's own completions file of step 3 is no reference: the evaluation after step 3 logs again
    and rewrites completions_00003.parquet with the evaluation's completions."""
    for step in (1,):
        logged = pd.read_parquet(made["root"] / "trl-out" / "completions" / f"completions_{step:05d}.parquet")
        ours = samples[samples["step"] == step].sort_values(["group", "sample_idx"])
        assert ours["prompt"].tolist() == logged["prompt"].tolist()
        assert ours["completion"].tolist() == logged["completion"].tolist()
        assert ours["advantage"].tolist() == logged["advantage"].tolist()
        assert ours["rewards/digits"].tolist() == pytest.approx(logged["digits"].tolist(), nan_ok=True)
    for _, rows in samples.groupby(["step", "group"]):
        r = torch.tensor(rows["reward"].to_numpy())
        trl_rule = (r - r.mean()) / (r.std() + 1e-4)  # TRL: N-1 std, plus 1e-4
        assert rows["advantage"].to_numpy() == pytest.approx(trl_rule.numpy(), abs=1e-6)
        ours = group_advantages(r[None], "sample").advantages[0]  # the config's std_mode, as the Groups page uses
        assert rows["advantage"].to_numpy() == pytest.approx(ours.numpy(), rel=1e-3, abs=1e-3)


def test_the_reader_opens_the_run(made):
    info = read_run(made["runs"], "trl-live")
    assert not info.problems and info.state == "finished" and info.get("source") == "trl"
    for table in ("scalars", "samples"):
        read = TableReader(made["run"], table).read()
        assert read.table is not None and read.table.num_rows and not read.problems
    for table in ("histograms", "tokens"):  # not logged by TRL: absent, and the reader says so
        assert "is missing" in TableReader(made["run"], table).read().problems[0]


def test_a_failing_reward_marks_the_run_failed(made):
    calls = []

    def breaks_on_the_second_batch(prompts, completions, **kwargs):
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("reward server down")
        return [0.0] * len(prompts)

    run = made["runs"] / "trl-broken"
    with pytest.raises(RuntimeError, match="reward server down"):
        run_trl(made["root"], "broken-out", callbacks=[RunDirCallback(run)],
                reward_funcs=[correct, breaks_on_the_second_batch], eval_strategy="no", log_completions=False)
    status = json.loads((run / "status.json").read_text())
    assert status["state"] == "failed" and status["error"] == "RuntimeError: reward server down"
    assert sorted(read_table(run, "samples")["step"].unique()) == [1]  # what was written stays readable
    with pytest.raises(FileExistsError, match="holds a run already"):  # a second run never mixes into it
        run_trl(made["root"], "again-out", callbacks=[RunDirCallback(run)], eval_strategy="no", max_steps=1)
    assert json.loads((run / "status.json").read_text())["state"] == "failed"


def test_a_bad_run_folder_name_is_refused_up_front(tmp_path):
    with pytest.raises(ValueError, match="run's name"):
        RunDirCallback(tmp_path / "no spaces please")


def test_the_docs_table_lists_every_mapped_metric():
    text = (ROOT / "docs" / "trl-and-verl.md").read_text()
    for theirs, ours in names.METRICS.items():
        assert re.search(rf"\|\s*`{re.escape(theirs)}`\s*\|\s*`{re.escape(ours)}`\s*\|", text), theirs
    for theirs, ours in names.OPTIONS.items():
        assert f"`{theirs}`" in text and f"`{ours}`" in text


# --- the dashboard ------------------------------------------------------------------------------


@pytest.fixture
def app(made, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(made["runs"]))
    return open_page


def test_runs_lists_the_trl_run_beside_the_native_one(app):
    df = app("runs").dataframe[0].value
    assert {"native", "trl-live"} <= set(df["name"])
    trl = df[df["name"] == "trl-live"].iloc[0]
    assert "finished" in trl["state"] and trl["step"] == "4 / 4" and trl["algo"] == "grpo"


def test_live_draws_trls_curves_and_says_what_trl_does_not_log(app):
    at = app("live", "trl-live", **live_open())  # every closed section opened
    titles = [json.loads(c.proto.spec).get("title") for c in at.get("vega_lite_chart")]
    names_shown = [t["text"] if isinstance(t, dict) else t for t in titles]
    for expected in ("Reward", "KL to reference", "Clip fraction", "Entropy", "Gradient norm", "Completion length"):
        assert expected in names_shown
    assert "Ratio histogram over steps" not in names_shown
    assert "Not logged by TRL" in texts(at.caption) and not at.warning


def test_groups_opens_a_trl_group(app):
    at = app("groups", "trl-live")
    body = " ".join(e.proto.body for e in at.get("html"))
    assert "grpo-responses" in body
    # TRL divides by std + 1e-4; the page recomputes with that epsilon from config.json
    assert "Recomputed advantages equal the logged ones" in texts(at.success), texts(at.error)
    assert "not logged by TRL" in texts(at.caption)


def test_compare_overlays_the_trl_run_with_a_native_one(app):
    at = app("compare", "trl-live", cmp_runs=["trl-live", "native"])
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    assert spec["encoding"]["color"]["scale"]["domain"] == ["trl-live", "native"]
    summary = at.dataframe[0].value
    assert summary["run"].tolist() == ["trl-live", "native"] and summary["best reward"].notna().all()
