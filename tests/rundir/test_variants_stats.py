"""Statistics across seeds (grpo_lab/rundir/variants.py): intervals, IQM, differences, verdicts,
grouping runs into variants, and the x-axes. The worked numbers are small enough to check by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from grpo_lab.rundir import variants
from grpo_lab.rundir.metrics import value_bounds


def long(rows: dict[str, list[float]]) -> pd.DataFrame:
    """{run: [value at step 1, 2, ...]} as the long frame the functions take."""
    return pd.DataFrame([{"run": run, "step": i + 1, "value": v} for run, vs in rows.items() for i, v in enumerate(vs)])


def test_t_interval_matches_the_hand_computation():
    # values 1, 2, 3: mean 2, sd 1, n 3: half width t(2) * 1 / sqrt(3) = 4.303 / 1.732 = 2.484
    m, lo, hi, n = variants.mean_ci([1.0, 2.0, 3.0])
    assert (m, n) == (2.0, 3)
    assert hi - m == pytest.approx(4.303 / math.sqrt(3), abs=1e-9)
    assert m - lo == pytest.approx(hi - m)
    m, lo, _, n = variants.mean_ci([np.nan, 4.0])  # a seed with no value yet is left out
    assert (m, n) == (4.0, 1) and math.isnan(lo)
    assert variants.mean_ci([])[3] == 0


def test_t_quantile_decreases_towards_the_normal_one():
    qs = [variants.t975(df) for df in (1, 2, 5, 30, 31, 100, 10_000)]
    assert qs == sorted(qs, reverse=True)
    assert qs[-1] == pytest.approx(1.96, abs=1e-3)
    assert variants.t975(40) == pytest.approx(2.021, abs=2e-3)  # the table's value for 40
    assert math.isnan(variants.t975(0))


def test_iqm_ignores_one_diverged_seed():
    assert variants.iqm([0.5, 0.52, 0.48, 0.5, -10.0, 0.51, 0.49, 0.5]) == pytest.approx(0.5, abs=0.01)
    assert np.mean([0.5, 0.52, 0.48, 0.5, -10.0, 0.51, 0.49, 0.5]) < 0  # where the mean is fooled


def test_band_counts_only_the_runs_that_reached_a_step():
    b = variants.band(long({"a": [0.0, 1.0, 2.0], "b": [2.0, 3.0]}))
    assert b["n"].tolist() == [2, 2, 1]
    assert b["mean"].tolist() == [1.0, 2.0, 2.0]
    assert math.isnan(b["low"].iloc[2])  # one seed: no interval, not a zero-width one
    assert (b["low"].iloc[:2] < b["mean"].iloc[:2]).all() and (b["high"].iloc[:2] > b["mean"].iloc[:2]).all()


def test_a_kl_band_and_interval_stop_at_zero():
    """KL is >= 0: a t-interval over 3 seeds near 0 would reach below it; the band and the table are
    cut at 0 (the true mean is inside [0, inf), so the cut interval keeps its coverage)."""
    kls = {"a": [0.0, 0.01], "b": [0.0, 0.02], "c": [0.0, 0.3]}
    plain = variants.band(long(kls))
    assert plain["low"].iloc[1] < 0  # what the page drew before
    cut = variants.band(long(kls), bounds=value_bounds("kl/mean"))
    assert cut["low"].iloc[1] == 0.0 and cut["high"].iloc[1] == plain["high"].iloc[1]
    assert cut["mean"].tolist() == plain["mean"].tolist()
    per_run = variants.per_run(long({"a": [0.2], "b": [0.4], "c": [0.9]}), long({k: v[1:] for k, v in kls.items()}))
    table = variants.summary_table(per_run, {"v": ["a", "b", "c"]}).set_index("metric")
    assert table.loc["final KL", "ci_low"] == 0.0 and table.loc["final KL", "ci_high"] > table.loc["final KL", "mean"]
    assert table.loc["final reward", "ci_low"] < 0  # a reward has no bound: left as it is
    assert value_bounds("clip/total") == (0.0, 1.0) and value_bounds("rewards/correctness/mean") == (None, None)


def test_per_run_metrics():
    reward = long({"a": [0.1, 0.6, 0.4], "b": [0.0, 0.1, 0.2]})
    kl = long({"a": [0.0, 0.01, 0.02], "b": [0.0, 0.0, 0.5]})
    r = variants.per_run(reward, kl, threshold=0.5).set_index("run")
    assert r.loc["a", "final reward"] == 0.4 and r.loc["a", "best reward"] == 0.6
    assert r.loc["a", "reward AUC"] == pytest.approx(1.1 / 3)
    assert r.loc["a", "steps to threshold"] == 2 and math.isnan(r.loc["b", "steps to threshold"])
    assert r.loc["b", "final KL"] == 0.5


def test_summary_table_has_every_metric_per_variant_with_n():
    reward = long({"a0": [0.1, 0.2], "a1": [0.2, 0.3], "b0": [0.5, 0.9]})
    table = variants.summary_table(variants.per_run(reward), {"A": ["a0", "a1"], "B": ["b0"]})
    assert len(table) == 2 * len(variants.METRICS)
    final = table[table["metric"] == "final reward"].set_index("variant")
    assert final.loc["A", "mean"] == pytest.approx(0.25) and final.loc["A", "n"] == 2
    assert final.loc["B", "n"] == 1 and math.isnan(final.loc["B", "ci_low"])


def test_a_clear_difference_is_called_and_an_unclear_one_is_not():
    clear = variants.difference([0.10, 0.12, 0.11, 0.09, 0.13], [0.30, 0.31, 0.29, 0.32, 0.28])
    assert clear["low"] > 0 and clear["diff"] == pytest.approx(0.19)
    assert variants.verdict(clear, "beta=0", "beta=0.04").startswith("beta=0.04 is higher than beta=0 in final reward by 0.19 [")

    reverse = variants.difference([0.30, 0.31, 0.29], [0.10, 0.12, 0.11])
    assert variants.verdict(reverse, "A", "B").startswith("A is higher than B")

    noisy = variants.difference([0.1, 0.5, 0.3], [0.2, 0.6, 0.35])
    assert noisy["low"] < 0 < noisy["high"]
    text = variants.verdict(noisy, "A", "B")
    assert "not distinguishable" in text and "with 3 and 3 seeds" in text
    # the sample-size rule: 2 (z_.975 + z_.8)^2 s^2 / d^2 with the pooled variance
    s2 = (np.var([0.1, 0.5, 0.3], ddof=1) + np.var([0.2, 0.6, 0.35], ddof=1)) / 2
    assert noisy["needed"] == math.ceil(2 * (1.959964 + 0.841621) ** 2 * s2 / noisy["diff"] ** 2)
    assert f"about {noisy['needed']} seeds" in text

    one = variants.difference([0.1], [0.2, 0.3])
    assert "at least 2 seeds" in variants.verdict(one, "A", "B")


def test_runs_launched_apart_form_one_variant_when_only_seed_and_name_differ():
    base = {"beta": 0.04, "lr": 0.002, "runs_dir": "/x"}
    groups = variants.group_variants({
        "a": {**base, "seed": 0, "name": "a"}, "b": {**base, "seed": 1, "name": "b", "runs_dir": "/y"},
        "c": {**base, "beta": 0.0, "seed": 0, "name": "c"},
        "d": {**base, "sweep": "s", "variant": "beta=0.04", "seed": 0}})
    assert sorted(groups.values()) == [["a", "b"], ["c"], ["d"]]
    assert "s/beta=0.04" in groups


def test_x_axes():
    df = pd.DataFrame({"step": [1, 2, 3], "completion/length_mean": [2.0, np.nan, 4.0], "time/step_s": [6.0, 6.0, 6.0]})
    assert variants.x_axis(df, 32, "completions").tolist() == [32, 64, 96]
    assert variants.x_axis(df, 10, "tokens").tolist() == [20.0, 20.0, 60.0]  # a step with no length adds nothing
    assert variants.x_axis(df, 10, "wall").tolist() == pytest.approx([0.1, 0.2, 0.3])  # no wall_s: summed step times
    with pytest.raises(ValueError, match="x: must be one of step, completions, tokens, wall"):
        variants.x_axis(df, 10, "epochs")


@pytest.mark.parametrize("values, message", [
    ({"sweep": "a/b"}, "sweep: must be empty or a name of letters"),
    ({"variant": "beta=0\nx"}, "variant: must be a one-line label"),
    ({"variant": "x" * 201}, "variant: must be a one-line label of at most 200 characters"),
])
def test_sweep_fields_are_checked_like_any_option(values, message):
    """config.json is input too: a sweep or variant read back from disk goes through the same checks."""
    from grpo_lab.trainer.config import ConfigError, from_dict

    with pytest.raises(ConfigError, match=message):
        from_dict({"name": "n", **values})
    assert from_dict({"name": "n", "sweep": "s", "variant": "beta=0.04"}).run_record()["variant"] == "beta=0.04"
