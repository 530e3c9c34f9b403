"""status.json and the scalars table are input too: each field and column is held to what the trainer writes
(rundir/status.py, rundir/metrics.py); one that is not is left out with one line naming the file and the
field or column, and the Runs, Live and Compare pages stay up. A run folder that is a symlink is listed
with the reason it is not read, rather than silently left out."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_lab.rundir import reader
from grpo_lab.rundir.layout import part_name, write_json_atomic
from grpo_lab.rundir.runs_index import RunsIndex

GOOD = {"state": "finished", "pid": 0, "step": 2, "total_steps": 2, "started_at": 1.7e9, "updated_at": 1.7e9}


def planted(runs, name="r", **status):
    (runs / name).mkdir(parents=True)
    (runs / name / "status.json").write_text(json.dumps({**GOOD, **status}, allow_nan=True))
    write_json_atomic(runs / name / "config.json", {"name": name, "algo": "grpo", "max_steps": 2})
    return runs / name


def listed(runs) -> dict[str, reader.RunInfo]:
    """The run as both listings read it: list_runs, and the index the Runs page keeps (the same, exactly)."""
    first = {r.name: r for r in reader.list_runs(runs)}
    assert [(r.name, r.problems, r.status) for r in RunsIndex(runs).refresh().runs] == [
        (r.name, r.problems, r.status) for r in first.values()]
    return first


@pytest.mark.parametrize("field, value", [
    ("state", {"x": 1}), ("started_at", 1e308), ("started_at", float("inf")), ("started_at", float("nan")),
    ("started_at", 1e20), ("total_steps", -1), ("step", "3"), ("step", True), ("error", {"a": 1}), ("pid", 1.5),
])
def test_a_status_field_of_the_wrong_type_is_left_out_with_one_line(tmp_path, field, value):
    info = listed(planted(tmp_path, **{field: value}).parent)["r"]
    assert field not in info.status or info.status[field] is None
    lines = [p for p in info.problems if p.startswith(f"status.json: {field} ")]
    assert len(lines) == 1 and "\n" not in lines[0], info.problems
    assert info.state in ("finished", "unknown") and (info.started_at is None or math.isfinite(info.started_at))
    assert info.total_steps >= 0 and isinstance(info.error, (str, type(None)))


@pytest.mark.parametrize("where", ["tables", "tables/scalars"])
def test_tables_or_scalars_that_is_a_file_is_a_problem_line(tmp_path, where):
    run = planted(tmp_path)
    (run / where).parent.mkdir(parents=True, exist_ok=True)
    (run / where).write_text("not a folder")
    problems = listed(tmp_path)["r"].problems
    assert any(p.startswith(f"{where} is a file") for p in problems), problems


def test_a_run_folder_that_is_a_symlink_is_listed_with_why(tmp_path):
    runs = tmp_path / "runs"
    planted(runs, "real")
    (runs / "alias").symlink_to(runs / "real")
    (runs / "loop").symlink_to(runs / "loop")
    (runs / "out").symlink_to(planted(tmp_path / "elsewhere", "x"))
    found = listed(runs)
    for name in ("alias", "loop", "out"):
        assert found[name].status is None and len(found[name].problems) == 1, found[name].problems
        assert found[name].problems[0].startswith(f"{name} is a symlink"), found[name].problems
    assert found["real"].problems == []


def scalars_part(run, columns: dict):
    folder = run / "tables" / "scalars"
    folder.mkdir(parents=True)
    pq.write_table(pa.table(columns), folder / part_name(1, 2))


BAD_COLUMNS = {"step": pa.array([1, 2]), "time": pa.array([1.7e9, 1.7e9 + 1]),
               "reward/mean": pa.array([[1.0], [2.0]]), "mismatch/ratio_mean": pa.array(["<b>", "x"]),
               "kl/mean": pa.array([{"a": 1}, {"a": 2}]), "loss/policy": pa.array([0.1, 0.2])}


def test_scalars_columns_that_are_not_numbers_are_left_out_naming_the_column(tmp_path):
    from grpo_lab.rundir.reader import numeric_scalars

    kept, problems = numeric_scalars(pa.table(BAD_COLUMNS))
    assert kept.column_names == ["step", "time", "loss/policy"]
    assert [p.split(" holds")[0] for p in problems] == [
        "tables/scalars: column reward/mean", "tables/scalars: column mismatch/ratio_mean",
        "tables/scalars: column kl/mean"]


def test_the_pages_stay_up_over_planted_status_and_scalars(tmp_path, monkeypatch):
    from app_helpers import open_page

    runs = tmp_path / "runs"
    run = planted(runs, "r", state={"x": 1}, started_at=float("nan"), total_steps=-1)
    scalars_part(run, BAD_COLUMNS)
    planted(runs, "far", started_at=1e308)
    scalars_part(runs / "far", {**BAD_COLUMNS, "reward/mean": pa.array([0.5, 0.6])})
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    at = open_page("runs", runs_pick="r")
    assert set(at.dataframe[0].value["name"]) == {"r", "far"}
    at = open_page("live", run="r")
    shown = " ".join(str(e.value) for e in (*at.warning, *at.caption, *at.markdown))
    assert "mismatch/ratio_mean" in shown and "status.json: state" in shown, shown[:2000]
    at = open_page("compare", cmp_runs=["r", "far"])
    assert "reward/mean" in " ".join(str(e.value) for e in (*at.warning, *at.caption, *at.markdown))
