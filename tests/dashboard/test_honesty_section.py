"""Live's "Is the reward honest?" section and Groups' "hacking suspects" ordering, under AppTest, on a run
whose reward is gamed in a known way (tests/honesty_helpers.py): drawn from the run's honesty/* scalars, and
recomputed from the samples table for a run without them (an import, an older run), saying what it cannot
compute. The same in a real browser: tests/dashboard/browser/test_honesty_browser.py."""

from __future__ import annotations

import pytest

from app_helpers import charts, live_open, open_page, texts
from grpo_lab.dashboard.views.live import live_view
from grpo_lab.rundir import group_order
from grpo_lab.rundir import query as rq
from honesty_helpers import HACKED, SUSPECT, write_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("honesty-runs")
    write_run(root, "lens")
    write_run(root, "imported", lens=False)
    write_run(root, "bare", lens=False, answers=False)
    return root


def section(at) -> str:
    return texts(at.caption) + " " + " ".join(str(e.label) for e in at.expander)


def test_the_section_draws_the_runs_own_figures(runs, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    shut = open_page("live", "lens")
    assert "Is the reward honest?" in section(shut) and "Is the reward rising because" not in section(shut)
    at = open_page("live", "lens", **live_open("honesty"))
    assert "Is the reward rising because the answers got better" in texts(at.caption)
    titles = " ".join(str(c.proto.spec) for c in charts(at))
    for title in ("Which reward decides the advantage", "Reward against length", "Top completions failing the strict"):
        assert title in titles
    assert "recomputed here" not in texts(at.caption)
    assert "training reward against held-out accuracy (no eval/accuracy)" in texts(at.caption)  # no evaluation


def test_a_run_without_the_figures_gets_them_recomputed_with_the_strict_check_run_here(runs, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    at = open_page("live", "imported", **live_open("honesty"))
    caption = texts(at.caption)
    assert "recomputed here from its samples table" in caption and "The strict check was run here" in caption
    titles = " ".join(str(c.proto.spec) for c in charts(at))
    assert "Which reward decides the advantage" in titles and "Top completions failing the strict" in titles


def test_a_run_without_answers_says_the_strict_check_cannot_be_computed(runs, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    at = open_page("live", "bare", **live_open("honesty"))
    assert "Not computed for this run: the strict check (the run kept no strict_pass" in texts(at.caption)
    titles = " ".join(str(c.proto.spec) for c in charts(at))
    assert "Reward against length" in titles
    assert "Top completions failing the strict" not in titles  # said in the caption, not drawn empty


def test_in_chinese(runs, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    at = open_page("live", "imported", lang="zh", **live_open("honesty"))
    assert "奖励在上升" in texts(at.caption) and "重新计算" in texts(at.caption)
    assert any("奖励是否诚实" in str(e.label) for e in at.expander)


@pytest.mark.parametrize("run", ["lens", "imported"])
def test_hacking_suspects_put_the_gamed_group_first(runs, run):
    columns = set(rq.query(runs / run, "samples", "SELECT * FROM {src} LIMIT 0")[0].columns)
    groups, problems = rq.query(runs / run, "samples", group_order.figures_sql(columns), {"step": HACKED})
    assert problems == [] and group_order.available(groups, "suspects")
    ranked = group_order.ordered(groups, "suspects")
    assert int(ranked["group"].iloc[0]) == SUSPECT
    assert ranked["suspects"].notna().all()  # group 0's lengths are all equal: DuckDB's corr is NaN there, counted 0
    if run == "lens":  # its two padded winners fail the strict check and were pushed up by length: 2 + 2 + corr
        assert ranked["suspects"].iloc[0] > 4 and ranked["suspects"].iloc[1] < 1


def test_an_import_without_token_counts_is_ordered_by_its_characters(runs):
    columns = set(rq.query(runs / "imported", "samples", "SELECT * FROM {src} LIMIT 0")[0].columns) - {"length"}
    groups, problems = rq.query(runs / "imported", "samples", group_order.figures_sql(columns), {"step": HACKED})
    assert problems == [] and "length(completion)" in group_order.suspects_sql(columns)
    ranked = group_order.ordered(groups, "suspects")
    assert int(ranked["group"].iloc[0]) == SUSPECT and ranked["suspects"].iloc[0] > 0.5


def test_a_lens_finding_and_a_lens_curve_open_groups_by_suspects(runs, monkeypatch):
    assert group_order.sort_for_finding("strict_check_disagrees") == "suspects"
    assert group_order.sort_for_panel(("honesty/length/sign_share",)) == "suspects"
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    at = open_page("groups", "lens")
    at.query_params["step"], at.query_params["sort"] = str(HACKED), "suspects"
    at.run()
    assert not at.exception
    assert at.selectbox(key=f"groups_pick_{HACKED}_suspects").value == SUSPECT
    assert "Groups by how suspect their high rewards are" in texts(at.caption)
