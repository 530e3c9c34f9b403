"""The benches' sweep report (bench/sweep_stats.py): the plan of a variants sweep, the per-run
table and the markdown it prints, on hand-made numbers. No bench is run here."""

from __future__ import annotations

import doctest
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
import bench_ppo_vs_grpo  # noqa: E402
import bench_variants  # noqa: E402
import sweep_stats  # noqa: E402
from grpo_lab.launching.sweep import MAX_SWEEP_RUNS, SweepError  # noqa: E402
from grpo_lab.trainer.config import from_dict  # noqa: E402


def test_docstring_examples_run():
    result = doctest.testmod(sweep_stats)
    assert result.attempted >= 6 and result.failed == 0


def test_plan_labels_every_run_with_sweep_variant_and_seed():
    runs = sweep_stats.plan_variants("pvg", {"max_steps": 7}, bench_ppo_vs_grpo.plans(8), [0, 1, 2])
    assert [r.name for r in runs[:3]] == ["pvg-grpo-s0", "pvg-grpo-s1", "pvg-grpo-s2"]
    assert {r.variant for r in runs} == {"grpo", "ppo", "ppo-1"} and len(runs) == 9
    ppo1 = [r for r in runs if r.variant == "ppo-1"][1]
    assert ppo1.values == {"max_steps": 7, "algo": "ppo", "group_size": 1, "seed": 1, "sweep": "pvg",
                           "variant": "ppo-1", "name": "pvg-ppo-1-s1"}


def test_plan_refuses_what_a_sweep_refuses():
    with pytest.raises(SweepError, match="name"):
        sweep_stats.plan_variants("bad name", {}, {"a": {}}, [0])
    with pytest.raises(SweepError, match=f"at most {MAX_SWEEP_RUNS}"):
        sweep_stats.plan_variants("s", {}, {"a": {}}, list(range(MAX_SWEEP_RUNS + 1)))


@pytest.mark.parametrize("name", list(bench_variants.VARIANTS))
def test_every_variant_is_a_valid_trainer_config(name):
    # a typo in an option would otherwise surface only when the sweep is checked, minutes into a bench
    cfg = from_dict({**bench_variants.VARIANTS[name], "logging": "scalars"})
    for key, value in bench_variants.VARIANTS[name].items():
        assert getattr(cfg, key) == value


def test_ppo_plans_are_valid_trainer_configs():
    for opts in bench_ppo_vs_grpo.plans(8).values():
        assert from_dict(dict(opts)).group_size == opts["group_size"]


def test_per_run_table_takes_final_best_auc_kl_and_extras():
    with_kl = pd.DataFrame({"step": [1, 2, 3], "reward/mean": [0.2, 0.8, 0.5], "kl/mean": [0.0, 0.1, 0.3],
                            "time/step_s": [9.0, 1.0, 2.0]})
    no_kl = pd.DataFrame({"step": [1, 2], "reward/mean": [0.1, 0.3]})  # beta 0 logs no kl/mean
    extras = [("s/step", lambda df: df["time/step_s"].median() if "time/step_s" in df else math.nan)]
    table = sweep_stats.per_run_table({"a": with_kl, "b": no_kl}, extras).set_index("run")
    assert table.loc["a", ["final reward", "best reward", "final KL", "s/step"]].tolist() == [0.5, 0.8, 0.3, 2.0]
    assert table.loc["a", "reward AUC"] == pytest.approx(0.5)
    assert math.isnan(table.loc["b", "final KL"]) and table.loc["b", "final reward"] == 0.3


def test_summary_gives_n_mean_ci_and_iqm_per_variant():
    runs = pd.DataFrame({"run": ["a", "b", "c", "d"], "final reward": [0.5, 0.7, 0.6, 0.9],
                         "s/step": [1.0, 1.0, 1.0, 2.0]})
    text = sweep_stats.summary_markdown(runs, {"x": ["a", "b", "c"], "one": ["d"]}, ["final reward", "s/step"],
                                        digits={"s/step": 1})
    lines = text.splitlines()
    assert lines[0] == "| variant | n | final reward mean [95% CI] | s/step mean [95% CI] | final reward IQM |"
    # 0.6 +- t(2) 4.303 * sd 0.1 / sqrt(3) = 0.248; s/step has no spread: its interval has width 0
    assert lines[2] == "| x | 3 | 0.600 [0.352, 0.848] | 1.0 [1.0, 1.0] | 0.600 |"
    assert lines[3] == "| one | 1 | 0.900 | 2.0 | 0.900 |"  # one seed: no interval, not a fake one


def test_differences_say_only_what_the_interval_supports():
    runs = pd.DataFrame({"run": list("abcdefghi"),
                         "final reward": [0.5, 0.6, 0.7, 0.55, 0.65, 0.6, 0.9, 0.95, 0.92]})
    groups = {"base": ["a", "b", "c"], "same": ["d", "e", "f"], "better": ["g", "h", "i"]}
    rows = sweep_stats.differences_markdown(runs, groups, ["final reward"], "base").splitlines()[2:]
    assert len(rows) == 2 and not any(r.startswith("| base − base") for r in rows)
    same, better = rows
    assert "| same − base | final reward | +0.000 [" in same and "not distinguishable" in same
    assert "| better − base |" in better and "better is higher than base in final reward by 0.323" in better


def test_differences_with_one_seed_say_they_cannot_compare():
    runs = pd.DataFrame({"run": ["a", "b", "c"], "final reward": [0.5, 0.6, 0.9]})
    row = sweep_stats.differences_markdown(runs, {"x": ["a", "b"], "y": ["c"]}, ["final reward"], "x").splitlines()[2]
    assert "| +0.350 |" in row and "cannot be compared" in row


def test_last_value_skips_steps_without_an_evaluation():
    df = pd.DataFrame({"step": [1, 2, 3], "eval/accuracy": [0.4, 0.5, None]})
    assert bench_variants.last_value("eval/accuracy")(df) == 0.5
    assert math.isnan(bench_variants.last_value("eval/accuracy")(df.drop(columns="eval/accuracy")))


def test_means_equal_up_to_rounding_give_a_verdict_not_an_error():
    # 0.6 as the mean of two different triples differs by 1e-16; variants.difference took that for a
    # real difference and asked for 8e30 seeds, an int numpy could not read: the report raised
    from grpo_lab.rundir import variants

    d = variants.difference([0.5, 0.6, 0.7], [0.55, 0.65, 0.6])
    assert math.isnan(d["needed"]) and d["low"] < 0 < d["high"]
    assert variants.verdict(d, "a", "b").endswith("; the means are equal.")
