"""Held-out evaluation curves (logged only on eval steps) get their own Live panel, gaps joined."""

import math

import pandas as pd

from grpo_lab.dashboard.views.metrics import panels
from grpo_lab.dashboard.views.series import long_frame


def test_eval_metrics_have_a_panel_and_missing_steps_are_skipped():
    nan = math.nan
    scalars = pd.DataFrame({
        "step": [1, 2, 3, 4, 5, 6],
        "wall_s": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
        "reward/mean": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
        "eval/accuracy": [0.25, nan, nan, 0.5, nan, 0.75],
        "eval/reward_mean": [0.2, nan, nan, 0.4, nan, 0.7],
    })
    by_title = {p.title: p.metrics for p in panels(list(scalars.columns))}
    assert by_title["Evaluation (held-out)"] == ("eval/accuracy", "eval/reward_mean")
    frame = long_frame(scalars, ["eval/accuracy"])
    assert frame["x"].tolist() == [1, 4, 6]
    assert frame["raw"].tolist() == [0.25, 0.5, 0.75]


def test_runs_without_eval_have_no_eval_panel():
    assert "Evaluation (held-out)" not in {p.title for p in panels(["step", "reward/mean"])}
