"""Planted or odd input around a run's rescores, ratings and the Groups address: each gives one line and
the rest keeps working (the command exits 2, the page stays up and says what it skipped), and nothing
is written outside the run. The run is a verl dump imported: no trainer needed."""

from __future__ import annotations

import json
import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_lab.finished_runs import rescore
from grpo_lab.dashboard import i18n
from grpo_lab.rundir import rescores
from run_sources import write_verl_dump

cli = __import__("importlib").import_module("grpo_lab.rundir.import")


@pytest.fixture
def run(tmp_path):
    write_verl_dump(tmp_path / "dump")
    assert cli.main([str(tmp_path / "dump"), "--name", "verl", "--runs-dir", str(tmp_path / "runs")]) == 0
    return tmp_path / "runs" / "verl"


def one_line_exit_2(capsys, argv: list[str]) -> str:
    assert rescore.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    return err


# --- the rescore command -------------------------------------------------------------------------------


def test_a_rescores_symlink_out_of_the_run_is_refused_and_nothing_is_written_outside(run, tmp_path, capsys):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (run / "rescores").symlink_to(outside)
    err = one_line_exit_2(capsys, [str(run), "--rewards", "length", "--name", "out"])
    assert "rescores/ in run verl is a symlink" in err
    assert list(outside.iterdir()) == []
    assert rescores.list_rescores(run) == []  # a reader does not follow it either


def test_a_rescores_file_is_refused_with_one_line(run, capsys):
    (run / "rescores").write_text("not a folder")
    err = one_line_exit_2(capsys, [str(run), "--rewards", "length", "--name", "f"])
    assert "rescores in run verl is not a folder" in err
    assert (run / "rescores").read_text() == "not a folder"


def test_reward_params_60000_deep_are_one_line(run, capsys):
    deep = '{"length": {"max_len": ' + "[" * 60_000 + "]" * 60_000 + "}}"
    err = one_line_exit_2(capsys, [str(run), "--rewards", "length", "--reward-params", deep])
    assert "--reward-params is nested deeper than" in err
    assert not (run / "rescores").exists()


def test_a_config_json_100000_deep_is_one_line(run, capsys):
    (run / "config.json").write_text('{"rewards": ' + "[" * 100_000 + "]" * 100_000 + "}")
    err = one_line_exit_2(capsys, [str(run), "--rewards", "length"])
    assert "config.json is nested deeper than" in err


# --- the Groups page ----------------------------------------------------------------------------------


def groups_page(run, monkeypatch, **address):
    from app_helpers import open_page

    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(run.parent))
    at = open_page("groups", run="verl")
    for key, value in address.items():
        at.query_params[key] = value
    if address:
        at.run(timeout=120)
    assert not at.exception, [e.message for e in at.exception]
    assert not [e.value for e in at.error if "hit a problem" in str(e.value)]
    return at


def test_the_groups_form_with_60000_deep_params_says_so_and_stays_up(run, monkeypatch):
    from app_helpers import texts

    at = groups_page(run, monkeypatch)
    at.text_input(key="rescore_spec").set_value("length")
    at.text_input(key="rescore_params").set_value('{"length": ' + "[" * 60_000 + "]" * 60_000 + "}")
    next(b for b in at.button if b.label == i18n.texts("en")["rescore.start"]).click()
    at.run(timeout=120)
    assert not at.exception and "--reward-params is nested deeper than" in texts(at.error)


def plant_rescore(run, name: str, summary=None, table: pa.Table | None = None, summary_text: str | None = None):
    """A rescore folder as someone else may leave it: a real one made first, then parts replaced."""
    rescore.rescore(run, rescore.parse_request("length", name=name))
    folder = run / "rescores" / name
    if summary is not None or summary_text is not None:
        (folder / "summary.json").write_text(summary_text if summary_text is not None else json.dumps(summary))
    if table is not None:
        pq.write_table(table, folder / "samples.parquet")
    return folder


def real_table(run, name="real") -> pd.DataFrame:
    return pq.read_table(plant_rescore(run, name) / "samples.parquet").to_pandas()


PLANTED = {
    "a summary nested 100,000 deep": dict(summary_text='{"rewards": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    "a summary with text for a weight": dict(summary={"rewards": {"length": "heavy"}, "samples": 4}),
    "a summary with a list for a count": dict(summary={"reward_changed": [1, 2], "samples": 4}),
    "a summary that is a list": dict(summary=[1, 2, 3]),
}


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_a_planted_summary_is_one_line_and_the_page_stays_up(run, monkeypatch, case):
    from app_helpers import texts

    plant_rescore(run, "planted", **PLANTED[case])
    at = groups_page(run, monkeypatch)
    assert at.selectbox(key="rescore_pick").value == "planted"
    assert "summary.json" in texts(at.warning)


@pytest.mark.parametrize("case", ["no sample_idx", "sample_idx as text", "a reward column of text"])
def test_a_planted_samples_table_is_one_line_and_the_page_stays_up(run, monkeypatch, case):
    from app_helpers import texts

    frame = real_table(run)
    if case == "no sample_idx":
        frame = frame.drop(columns=["sample_idx"])
    elif case == "sample_idx as text":
        frame["sample_idx"] = frame["sample_idx"].astype(str)
    else:
        frame["rewards/length"] = "many"
    plant_rescore(run, "planted", table=pa.Table.from_pandas(frame, preserve_index=False))
    at = groups_page(run, monkeypatch)
    assert at.selectbox(key="rescore_pick").value == "planted"
    assert "samples.parquet" in texts(at.warning), texts(at.warning)


@pytest.mark.parametrize("where", ["labels/ratings/0001-ann.json", "labels/waiting.json", "labels/settings.json",
                                   "labels/closed.json", "labels/ratings-0001.parquet"])
def test_a_folder_named_like_a_rating_file_is_skipped_and_the_page_stays_up(run, monkeypatch, where):
    (run / where).mkdir(parents=True)
    groups_page(run, monkeypatch)


@pytest.mark.parametrize("step", ["²", "٣", "1" * 400, "9" * 5000, "-1", "0", " 2"])
def test_an_address_step_that_is_no_step_number_is_ignored_with_one_line(run, monkeypatch, step):
    from app_helpers import texts

    at = groups_page(run, monkeypatch, step=step)
    warned = texts(at.warning)
    assert "is not a step number" in warned and len(warned) < 2000, warned[:300]


def test_a_step_within_bounds_still_opens(run, monkeypatch):
    at = groups_page(run, monkeypatch, step="2")
    assert at.number_input(key="groups_step").value == 2


def test_the_json_reader_refuses_a_folder_in_one_line(tmp_path):
    from grpo_lab.rundir import json_file

    (tmp_path / "status.json").mkdir()
    data, problem = json_file.read(tmp_path / "status.json")
    assert data is None and "not a regular file" in problem
    assert os.listdir(tmp_path) == ["status.json"]
