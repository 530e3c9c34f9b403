"""python -m grpo_lab.rundir.import: a verl rollout dump (written here with exactly verl's fields) and a TRL output
folder (made by running TRL) become run directories the reader and every training page open; a source
that cannot be read gets one line and leaves nothing behind."""

import doctest
import importlib
import json
import math
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from app_helpers import open_page, texts
from grpo_lab.rundir.importers import names
from grpo_lab.rundir.importers import samples as sample_rows
from grpo_lab.rundir.reader import read_run
from grpo_lab.rundir.trl import RunDirCallback
from grpo_lab.objective.functions import group_advantages
from trainer_helpers import read_table
from run_sources import VERL_PROMPTS, write_verl_dump
from trl_helpers import G, run_trl

cli = importlib.import_module("grpo_lab.rundir.import")  # `import` is a keyword: the module is run as python -m grpo_lab.rundir.import


def run_cli(*args: str) -> int:
    return cli.main([*args])


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("import")
    runs = root / "runs"
    write_verl_dump(root / "verl-dump")
    # TRL with log_completions and a checkpoint at the end (its trainer_state.json), and the live
    # callback beside it: the imported run must say what the live one says.
    run_trl(root, "trl-out", callbacks=[RunDirCallback(runs / "trl-live")], eval_strategy="no",
            save_strategy="steps", save_steps=4)
    assert run_cli(str(root / "verl-dump"), "--name", "verl-run", "--runs-dir", str(runs)) == 0
    assert run_cli(str(root / "trl-out"), "--name", "trl-imported", "--runs-dir", str(runs)) == 0
    return {"root": root, "runs": runs}


# --- verl ---------------------------------------------------------------------------------------


def test_verl_dump_becomes_a_finished_run_marked_recomputed(made):
    info = read_run(made["runs"], "verl-run")
    assert not info.problems and info.state == "finished" and info.step == 2 and info.get("source") == "verl"
    assert info.config["advantage_source"] == "recomputed" and info.config["std_mode"] == "sample"
    assert info.config["group_size"] == G


def test_verl_groups_are_the_rows_of_a_step_with_the_same_input(made):
    samples = read_table(made["runs"] / "verl-run", "samples")
    assert len(samples) == 2 * len(VERL_PROMPTS) * G and samples["group"].dtype.kind == "i"
    for _, rows in samples.groupby(["step", "group"]):
        assert rows["prompt"].nunique() == 1 and sorted(rows["sample_idx"]) == list(range(G))
    assert samples.groupby("step")["group"].nunique().tolist() == [len(VERL_PROMPTS)] * 2
    assert samples["extra/acc"].isin([0.0, 1.0]).all()  # the reward's extra values, kept (as extra/<name>)


def test_verl_advantages_are_recomputed_with_the_std_mode(made, tmp_path):
    assert run_cli(str(made["root"] / "verl-dump"), "--name", "verl-group", "--runs-dir", str(tmp_path),
                   "--std-mode", "group") == 0
    for run, mode in ((made["runs"] / "verl-run", "sample"), (tmp_path / "verl-group", "group")):
        samples = read_table(run, "samples")
        for _, rows in samples.groupby(["step", "group"]):
            rows = rows.sort_values("sample_idx")
            expected = group_advantages(torch.tensor(rows["reward"].to_numpy(dtype=float))[None], mode).advantages[0]
            assert rows["advantage"].to_numpy() == pytest.approx(expected.numpy(), abs=1e-6)
        unscored = samples[samples["reward"].isna()]
        assert len(unscored) == 2 and (unscored["advantage"] == 0).all()  # null score: advantage 0
        flat = samples[samples["prompt"] == VERL_PROMPTS[2]]
        assert (flat["advantage"] == 0).all()  # all equal: no signal
    a = read_table(made["runs"] / "verl-run", "samples")["advantage"].abs().max()
    b = read_table(tmp_path / "verl-group", "samples")["advantage"].abs().max()
    assert b > a  # the 1/G std is the smaller: larger advantages


def test_verl_scalars_say_what_the_dump_holds(made):
    scalars = read_table(made["runs"] / "verl-run", "scalars")
    samples = read_table(made["runs"] / "verl-run", "samples")
    assert scalars["step"].tolist() == [1, 2]
    for step, rows in samples.groupby("step"):
        row = scalars[scalars["step"] == step].iloc[0]
        assert row["reward/mean"] == pytest.approx(rows["reward"].mean())
        assert row["groups/frac_zero_std"] == pytest.approx(1 / 3)
        assert row["advantage/max"] == pytest.approx(rows["advantage"].max())


# --- TRL ----------------------------------------------------------------------------------------


def test_trl_folder_imports_as_the_live_callback_wrote_it(made):
    live, imported = made["runs"] / "trl-live", made["runs"] / "trl-imported"
    info = read_run(made["runs"], "trl-imported")
    assert not info.problems and info.state == "finished" and info.step == 4 and info.get("source") == "trl"
    assert info.config["group_size"] == G and info.config["advantage_source"] == "trl"
    a, b = read_table(live, "samples"), read_table(imported, "samples")
    assert sorted(b["step"].unique()) == [1, 3]  # TRL's repeats of a batch at steps 2 and 4 are left out
    # what only the live callback sees of TRL's reward call: the completion ids and the dataset's columns (TRL's
    # completion logs hold neither: docs/trl-and-verl.md); every other column is the same
    live_only = set(a.columns) - set(b.columns)
    assert live_only and all(c == "source_completion_ids" or c.startswith("column/") for c in live_only), live_only
    assert set(b.columns) <= set(a.columns)
    pd.testing.assert_frame_equal(a[sorted(b.columns)], b[sorted(b.columns)], check_like=True)
    s_live, s_imported = read_table(live, "scalars"), read_table(imported, "scalars")
    shared = sorted((set(s_live.columns) & set(s_imported.columns)) - {"time", "wall_s"})
    assert "reward/mean" in shared and "clip/total" in shared and "trl/num_tokens" in shared
    pd.testing.assert_frame_equal(s_live[shared], s_imported[shared])


# --- sources that cannot be read ----------------------------------------------------------------


def bad_sources(root: Path) -> dict[str, tuple[Path, list[str], str]]:
    """name -> (source, extra arguments, what the one line must name)."""
    empty = root / "empty"
    empty.mkdir()
    no_score = root / "no-score"
    write_verl_dump(no_score, steps=1)
    lines = (no_score / "1.jsonl").read_text().splitlines()
    lines[4] = json.dumps({"input": "q", "output": "a"})
    (no_score / "1.jsonl").write_text("\n".join(lines) + "\n")
    not_json = root / "not-json"
    write_verl_dump(not_json, steps=2)
    (not_json / "2.jsonl").write_text("{'input': 'q'}\n")
    corrupt = root / "corrupt-trl" / "completions"
    corrupt.mkdir(parents=True)
    (corrupt / "completions_00001.parquet").write_bytes(b"PAR1 not really")
    columns = root / "columns-trl" / "completions"
    columns.mkdir(parents=True)
    pq.write_table(pa.table({"step": [1], "prompt": ["q"], "text": ["a"]}), columns / "completions_00001.parquet")
    return {
        "missing": (root / "nowhere", [], "nowhere: expected a folder"),
        "empty": (empty, [], "empty: expected a TRL output folder"),
        "no score": (no_score, [], "1.jsonl:5: expected a JSON object with input (text), output (text) and score"),
        "not json": (not_json, [], "2.jsonl:1: expected a JSON object"),
        "corrupt parquet": (corrupt.parent, [], "completions_00001.parquet: expected a Parquet file"),
        "wrong columns": (columns.parent, [], "missing completion, advantage"),
        "bad weights": (columns.parent, ["--reward-weights", "x"], "--reward-weights 'x': expected name=weight"),
        "bad name": (empty, ["--name", "../out"], "run name '../out'"),
    }


def test_a_source_it_cannot_read_gets_one_line_and_leaves_nothing(made, tmp_path, capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    for case, (source, extra, expected) in bad_sources(tmp_path).items():
        name = ["--name", "x"] if "--name" not in extra else []
        assert run_cli(str(source), *name, "--runs-dir", str(runs), *extra) == 2, case
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: ") and expected in err, (case, err)
        assert list(runs.iterdir()) == [], case  # no run, no temporary folder
    assert run_cli(str(made["root"] / "verl-dump"), "--name", "verl-run", "--runs-dir", str(made["runs"])) == 2
    assert "exists already" in capsys.readouterr().err


def test_the_docstring_examples_run():
    for module in (names, sample_rows):
        assert doctest.testmod(module).failed == 0, module.__name__


# --- the dashboard ------------------------------------------------------------------------------


def test_imported_runs_open_on_every_training_page(made, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(made["runs"]))
    df = open_page("runs").dataframe[0].value
    assert {"verl-run", "trl-imported", "trl-live"} <= set(df["name"])
    at = open_page("live", "verl-run")
    assert "Not in a verl rollout dump" in texts(at.caption) and at.get("vega_lite_chart") and not at.warning
    assert "Not logged by TRL" in texts(open_page("live", "trl-imported").caption)
    at = open_page("groups", "verl-run", groups_mode="positive")
    assert "Recomputed advantages equal the logged ones" in texts(at.success)  # one function, one std_mode
    open_page("groups", "trl-imported")
    at = open_page("compare", "verl-run", cmp_runs=["verl-run", "trl-imported"])
    assert at.get("vega_lite_chart") and not math.isnan(at.dataframe[0].value["best reward"].iloc[0])
