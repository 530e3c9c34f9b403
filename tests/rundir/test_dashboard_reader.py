"""grpo_lab.rundir.reader: safe run paths, listing damaged runs, and reading tables incrementally."""

import os
import time

import pyarrow as pa
import pytest

from grpo_lab.rundir.layout import RunPaths, part_name, write_json_atomic
from grpo_lab.rundir.reader import (RunNameError, TableReader, list_runs, read_run, run_path,
                           tail)
from grpo_lab.rundir.writer import TableWriter


def scalars(first, last):
    steps = list(range(first, last + 1))
    return {"step": steps, "time": [1e9 + s for s in steps], "wall_s": [float(s) for s in steps],
            "reward/mean": [s / 10 for s in steps]}


def write_part(folder, first, last):
    w = TableWriter(folder, compact_every=1000)
    w.append(scalars(first, last))
    w.flush()


@pytest.mark.parametrize("name", ["../x", "..", "a/b", "/etc", "", ".hidden", "a..b", "x" * 101, None, "a b"])
def test_run_path_refuses_names_that_could_leave_the_runs_folder(tmp_path, name):
    with pytest.raises(RunNameError):
        run_path(tmp_path, name)


def test_run_path_refuses_a_symlink_pointing_outside(tmp_path):
    runs, outside = tmp_path / "runs", tmp_path / "outside"
    runs.mkdir()
    outside.mkdir()
    (runs / "escape").symlink_to(outside)
    with pytest.raises(RunNameError, match="outside"):
        run_path(runs, "escape")
    assert run_path(runs, "fine-1.0_a") == runs.resolve() / "fine-1.0_a"


def test_list_runs_copes_with_empty_half_written_and_foreign_entries(tmp_path):
    (tmp_path / "empty").mkdir()
    half = tmp_path / "half"
    half.mkdir()
    write_json_atomic(half / "config.json", {"name": "half", "algo": "grpo", "max_steps": 5})
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "status.json").write_text("{not json")
    good = tmp_path / "good"
    write_json_atomic(good / "status.json", {"state": "finished", "pid": 0, "step": 3, "total_steps": 3,
                                             "started_at": time.time(), "name": "good", "algo": "grpo"})
    (tmp_path / "a-file.txt").write_text("not a run")
    (tmp_path / ".launcher").mkdir()
    runs = {r.name: r for r in list_runs(tmp_path)}
    assert set(runs) == {"empty", "half", "broken", "good"}
    assert runs["good"].state == "finished" and runs["good"].total_steps == 3
    assert runs["half"].state == "unknown" and runs["half"].total_steps == 5 and runs["half"].get("algo") == "grpo"
    assert any("status.json" in p for p in runs["empty"].problems)
    assert any("status.json" in p for p in runs["broken"].problems)
    assert list_runs(tmp_path / "missing") == []


def test_a_running_status_whose_process_is_gone_reads_as_failed(tmp_path):
    write_json_atomic(tmp_path / "dead" / "status.json", {"state": "running", "pid": 2 ** 22 + 12345, "step": 1})
    info = read_run(tmp_path, "dead")
    assert info.state == "failed" and "ended without reporting" in info.error


def test_table_reader_reads_only_new_parts(tmp_path):
    folder = RunPaths(tmp_path).table("scalars")
    reader = TableReader(tmp_path, "scalars")
    first = reader.read()
    assert first.table is None and "missing" in first.problems[0]
    write_part(folder, 1, 3)
    a = reader.read()
    assert a.table.num_rows == 3 and a.new_rows == 3 and not a.problems
    b = reader.read()
    assert b.new_rows == 0 and b.version == a.version and b.table is a.table
    write_part(folder, 4, 5)
    c = reader.read()
    assert c.new_rows == 2 and c.table.column("step").to_pylist() == [1, 2, 3, 4, 5]


def test_table_reader_follows_compaction_without_duplicates(tmp_path):
    folder = RunPaths(tmp_path).table("scalars")
    for first in (1, 3, 5):
        write_part(folder, first, first + 1)
    reader = TableReader(tmp_path, "scalars")
    assert reader.read().table.num_rows == 6
    # The merged part is written before the old ones go: for a moment both exist.
    merged = folder / part_name(1, 6, "c3")
    import pyarrow.parquet as pq

    pq.write_table(pa.table(scalars(1, 6)), merged)
    both = reader.read()
    assert both.table.column("step").to_pylist() == [1, 2, 3, 4, 5, 6]
    for p in folder.glob("part-*"):
        if p != merged:
            p.unlink()
    after = reader.read()
    assert after.table.column("step").to_pylist() == [1, 2, 3, 4, 5, 6] and after.new_rows == 0


def test_a_corrupt_or_truncated_part_is_reported_and_skipped(tmp_path):
    folder = RunPaths(tmp_path).table("scalars")
    write_part(folder, 1, 2)
    write_part(folder, 3, 4)
    bad = folder / part_name(5, 6)
    bad.write_bytes(b"PAR1 this is not parquet")
    good = sorted(folder.glob("part-*"))[1]
    truncated = folder / part_name(7, 8)
    truncated.write_bytes(good.read_bytes()[:40])
    read = TableReader(tmp_path, "scalars").read()
    assert read.table.column("step").to_pylist() == [1, 2, 3, 4]
    assert len(read.problems) == 2 and all("could not be read" in p for p in read.problems)


def test_tail_reads_the_end_of_a_file(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("".join(f"line {i}\n" for i in range(1000)))
    assert tail(log, 3) == "line 997\nline 998\nline 999"
    assert tail(tmp_path / "missing.log") == ""
    os.chmod(log, 0)
    if os.geteuid() != 0:
        assert tail(log) == ""
