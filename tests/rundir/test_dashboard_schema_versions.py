"""Runs written by another version of the run-directory contract, on every page that reads runs.

A version 1 run (before the `group` column) opens everywhere, its groups derived once in the
reader; a version 2 run (before tools, extras and ratings) too; a run from a newer version says
"upgrade" instead of being misread."""

import json
import shutil

import pandas as pd
import pyarrow.parquet as pq
import pytest
from app_helpers import charts, texts
from shared_runs import copy_run, grpo_run  # noqa: F401 (a fixture: pytest finds it by name)
from trainer_helpers import read_table

from grpo_lab.rundir.layout import (
    SCHEMA_VERSION,
    RunPaths,
    visible_parts,
    write_json_atomic,
)
from grpo_lab.rundir.query import query

RUN_PAGES = ["runs", "live", "groups", "compare", "group_advantage", "ratio_clip", "grpo_variants"]


def as_version(run, version: int) -> None:
    """Rewrite `run` as a trainer of schema `version` would have: version 1 has no group column."""
    status = json.loads((run / "status.json").read_text())
    write_json_atomic(run / "status.json", {**status, "schema_version": version})
    if version != 1:
        return
    for table in ("samples", "tokens"):
        for part in visible_parts(RunPaths(run).table(table)):
            rows = pq.read_table(part)
            pq.write_table(rows.drop_columns(["group"]), part)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, grpo_run):
    root = tmp_path_factory.mktemp("runs")
    copy_run(grpo_run, root, "now", checkpoints=False)  # the session's GRPO run, as this version writes it
    for name, version in (("v1", 1), ("v2", 2), ("future", SCHEMA_VERSION + 1)):
        shutil.copytree(root / "now", root / name, ignore=shutil.ignore_patterns("checkpoints"))
        as_version(root / name, version)
    return root


def test_a_version_1_run_gets_the_groups_the_trainer_wrote(runs):
    assert "group" not in read_table(runs / "v1", "samples").columns  # really a v1 run
    sql = 'SELECT step, "group", sample_idx, advantage FROM {src} ORDER BY step, "group", sample_idx'
    derived, problems = query(runs / "v1", "samples", sql)
    written, _ = query(runs / "now", "samples", sql)
    assert not problems
    pd.testing.assert_frame_equal(derived, written, check_dtype=False)
    sql = 'SELECT step, "group", sample_idx, position FROM {src} ORDER BY ALL'
    pd.testing.assert_frame_equal(query(runs / "v1", "tokens", sql)[0], query(runs / "now", "tokens", sql)[0],
                                  check_dtype=False)


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("page", RUN_PAGES)
def test_an_older_run_opens_on_every_page(app, page, version):
    at = app(page, version, cmp_runs=[version, "now"], runs_pick=version)
    assert "hit a problem" not in texts(at.error)
    assert "newer version" not in texts(at.warning) + texts(at.error)


def test_a_version_1_run_shows_its_groups_checked_against_the_formula(app):
    at = app("groups", "v1")
    assert "Recomputed advantages equal the logged ones" in texts(at.success)
    live = app("live", "v1")
    assert charts(live)


@pytest.mark.parametrize("page", ["runs", "live", "groups"])
def test_a_run_from_a_newer_version_says_upgrade(app, page):
    at = app(page, "future", runs_pick="future")  # runs_pick: the Runs page's own selection
    shown = texts(at.warning) + texts(at.error) + texts(at.info)
    assert f"run-directory schema {SCHEMA_VERSION + 1}" in shown and "upgrade grpo-lab" in shown
