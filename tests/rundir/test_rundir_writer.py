"""Part files: atomic, compacted, readable at every moment, truncated cleanly on resume."""

import pyarrow.parquet as pq
import pytest

from grpo_lab.rundir.layout import SCHEMA_VERSION, RunPaths, visible_parts
from grpo_lab.rundir.status import StatusFile, read_status
from grpo_lab.rundir.writer import RunWriter, TableWriter


def rows(step, n=2):
    return {"step": [step] * n, "value": [float(step)] * n}


def read_steps(folder):
    return [s for p in visible_parts(folder) for s in pq.read_table(p).column("step").to_pylist()]


def test_parts_are_compacted_and_every_step_kept(tmp_path):
    writer = TableWriter(tmp_path / "t", compact_every=5)
    for step in range(1, 23):
        writer.append(rows(step))
        writer.flush()
    assert len(list((tmp_path / "t").glob("part-*.parquet"))) < 5
    assert read_steps(tmp_path / "t") == [s for s in range(1, 23) for _ in range(2)]
    assert not list((tmp_path / "t").glob(".tmp-*"))
    meta = pq.read_schema(visible_parts(tmp_path / "t")[0]).metadata
    assert meta[b"grpo_lab.schema_version"] == str(SCHEMA_VERSION).encode()


def test_reader_skips_parts_covered_by_a_compacted_part(tmp_path):
    # The moment between writing a merged part and deleting the parts it replaces.
    writer = TableWriter(tmp_path / "t", compact_every=100)
    for step in (1, 2, 3):
        writer.append(rows(step))
        writer.flush()
    small = visible_parts(tmp_path / "t")
    merged = pq.read_table(small[0])
    import pyarrow as pa

    pq.write_table(pa.concat_tables([pq.read_table(p) for p in small]), tmp_path / "t" / "part-00000001-00000003-c3.parquet")
    assert len(list((tmp_path / "t").glob("part-*"))) == 4
    assert read_steps(tmp_path / "t") == [1, 1, 2, 2, 3, 3]
    assert merged.num_rows == 2


def test_truncate_after_drops_later_steps_only(tmp_path):
    writer = TableWriter(tmp_path / "t", compact_every=4)
    for step in range(1, 11):
        writer.append(rows(step))
        writer.flush()
    writer.truncate_after(6)
    assert read_steps(tmp_path / "t") == [s for s in range(1, 7) for _ in range(2)]
    writer.append(rows(7))
    writer.flush()
    assert read_steps(tmp_path / "t")[-2:] == [7, 7]


def test_logging_levels(tmp_path):
    paths = RunPaths(tmp_path)
    for level, expected in (("full", {"scalars", "samples"}), ("scalars", {"scalars"}), ("off", set())):
        writer = RunWriter(RunPaths(tmp_path / level), level=level, flush_seconds=0)
        writer.log("scalars", rows(1))
        writer.log("samples", rows(1))
        writer.close()
        written = {p.name for p in (tmp_path / level / "tables").iterdir()} if (tmp_path / level / "tables").exists() else set()
        assert {t for t in written if visible_parts(tmp_path / level / "tables" / t)} == expected
    assert paths.root == tmp_path


def test_status_is_rewritten_whole_and_dead_runs_read_as_failed(tmp_path):
    status = StatusFile(tmp_path / "status.json", total_steps=10)
    status.update(state="running", step=3)
    assert read_status(tmp_path / "status.json")["state"] == "running"  # our own pid is alive
    status.data["pid"] = 2**22 + 12345  # no such process
    status.update(step=4)
    seen = read_status(tmp_path / "status.json")
    assert seen["state"] == "failed" and seen["alive"] is False and seen["step"] == 4
    with pytest.raises(ValueError, match="state"):
        status.update(state="sleeping")
    (tmp_path / "bad.json").write_text("{half")
    assert read_status(tmp_path / "bad.json") is None
