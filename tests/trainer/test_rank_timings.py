"""Per-rank timings: with several processes rank 0 logs the slowest and the mean process's
generation and update seconds (time/generation_s_max, _mean, time/update_s_max, _mean), and Live's
Speed section draws them; a one-process run writes no such columns and Live draws no such panel.

The 2-process run is the real trainer under torchrun (gloo, one thread each) whose rank 1 samples
SLOW_S seconds late, so rank 0 can only see the straggler through rank 1's own figures.
"""

from __future__ import annotations

import json

import pytest

from app_helpers import charts, live_open, open_page
from grpo_lab.dashboard.views import metrics
from grpo_lab.trainer.step_records import merge_rank_seconds
from grpo_lab.trainer.timing import PHASES, RANK_PHASES, rank_scalars
from shared_runs import SLOW_S, two_process_runs  # noqa: F401  (a fixture)
from trainer_helpers import registered_metrics, read_table

RANK_METRICS = [f"time/{p}_s_{w}" for p in ("generation", "update") for w in ("max", "mean")]


# --- the figures -------------------------------------------------------------------------------


def test_rank_0_logs_the_slowest_and_the_mean_rank():
    parts = [{"generation": [1.0], "update": [0.5]}, {"generation": [3.0], "update": [0.25]}]
    merged = merge_rank_seconds(parts)
    assert merged == {"generation": [1.0, 3.0], "update": [0.5, 0.25]}  # rank order
    assert rank_scalars(merged) == {"time/generation_s_max": 3.0, "time/generation_s_mean": 2.0,
                                    "time/update_s_max": 0.5, "time/update_s_mean": 0.375}
    assert set(RANK_PHASES) <= set(PHASES)


# --- real runs -----------------------------------------------------------------------------------


@pytest.fixture
def runs(two_process_runs):
    """"two": 2 steps on 2 processes, rank 1 a straggler in sampling; "one": the same on one process."""
    return two_process_runs


def test_two_processes_log_the_slowest_and_the_mean_rank(runs):
    scalars = read_table(runs / "two", "scalars")
    assert scalars["step"].tolist() == [1, 2]
    written = {c for c in scalars.columns if c not in ("step", "time", "wall_s")}
    several = registered_metrics("grpo", rewards=["correctness"], processes=2)
    assert several - registered_metrics("grpo", rewards=["correctness"]) == set(RANK_METRICS)
    assert written == several  # documented, both ways
    for phase in ("generation", "update"):
        top, mean = scalars[f"time/{phase}_s_max"], scalars[f"time/{phase}_s_mean"]
        assert (mean > 0).all() and (top >= mean).all()
        assert (top >= scalars[f"time/{phase}_s"]).all()  # rank 0's own is one of the ranks'
    # rank 1 sampled SLOW_S late (once a step): the slowest is rank 1, and the mean halfway
    assert (scalars["time/generation_s_max"] >= scalars["time/generation_s"] + 0.5 * SLOW_S).all()
    gap = scalars["time/generation_s_max"] - scalars["time/generation_s_mean"]
    assert (gap >= 0.3 * SLOW_S).all()


def test_one_process_writes_none_of_them(runs):
    scalars = read_table(runs / "one", "scalars")
    written = {c for c in scalars.columns if c not in ("step", "time", "wall_s")}
    assert written == registered_metrics("grpo", rewards=["correctness"])
    assert not written & set(RANK_METRICS)


def chart_titles(at) -> list[str]:
    titles = [json.loads(c.proto.spec).get("title") for c in charts(at)]
    return [t["text"] if isinstance(t, dict) else t for t in titles]


def test_live_draws_the_straggler_panel_only_for_several_processes(runs, monkeypatch):
    from grpo_lab.dashboard.i18n import texts

    title = texts("en")["panel.ranks.title"]
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    at = open_page("live", "two", **live_open("speed"))
    speed = next(e for e in at.expander if e.label.startswith("Speed:"))
    assert title in speed.label and title in chart_titles(at)
    assert not at.warning and not at.error
    panel = next(p for p in metrics.panels(list(read_table(runs / "two", "scalars").columns)) if p.title == title)
    assert panel.metrics == tuple(RANK_METRICS) and panel.section == "speed" and not panel.stacked

    at = open_page("live", "one", **live_open("speed"))
    speed = next(e for e in at.expander if e.label.startswith("Speed:"))
    assert title not in speed.label and title not in chart_titles(at)
    assert "Where the step goes" in chart_titles(at)  # the section is open and drawn
