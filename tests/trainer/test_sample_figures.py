"""Per-sample figures of tables/samples (for "curve to groups"): each completion's share of the
step's kl/mean, clip/total, entropy/mean and ratio/max, so a step's groups can be ordered by them.
The worked numbers first, then a real run whose per-sample figures add up to its own scalars."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from grpo_lab.trainer.records import sample_figures
from grpo_lab.trainer.updates import LastPass
from trainer_helpers import read_table

# two completions: the first 3 tokens long, the second 2 (its third column is padding)
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
ENTROPY = torch.tensor([[0.3, 0.6, 0.9], [1.0, 2.0, 99.0]])


def one_pass(last: LastPass, ratio, kl, low, high) -> LastPass:
    last.record(torch.arange(2), logp=torch.zeros(2, 3), ratio=torch.tensor(ratio), kl=torch.tensor(kl),
                clipped_low=torch.tensor(low), clipped_high=torch.tensor(high), mask=MASK)
    return last


def last_pass() -> LastPass:
    nan = math.nan
    return one_pass(LastPass.like(torch.zeros(2, 3)),
                    ratio=[[1.0, 1.3, 0.7], [0.9, 1.1, nan]],  # padding may hold anything
                    kl=[[0.0, 0.03, 0.06], [0.1, 0.2, 50.0]],
                    low=[[False, False, True], [False, False, True]],
                    high=[[False, True, False], [False, False, False]])


def test_each_completion_gets_the_mean_over_its_own_tokens():
    batch = SimpleNamespace(mask=MASK, entropy=ENTROPY)
    got = sample_figures(batch, last_pass(), has_kl=True)
    assert got["kl_mean"] == pytest.approx([0.03, 0.15])  # (0 + .03 + .06) / 3, (.1 + .2) / 2: padding left out
    assert got["clipped_tokens"] == [2, 0]  # one low and one high; the padding's "clip" is not a token
    assert got["clip_frac"] == pytest.approx([2 / 3, 0.0])
    assert got["ratio_mean"] == pytest.approx([1.0, 1.0])
    assert got["entropy_mean"] == pytest.approx([0.6, 1.5])
    assert got["ratio_max"] == pytest.approx([1.3, 1.1])


def test_a_second_pass_counts_in_every_figure_not_only_the_last():
    """Two passes: a completion's figure is over its tokens x 2 (what kl/mean and clip/total average), its
    clipped tokens are both passes' and its ratio_max the larger of the two."""
    last = one_pass(last_pass(), ratio=[[1.0, 1.0, 1.0], [2.0, 1.0, 0.0]], kl=[[0.3, 0.3, 0.3], [0.0, 0.0, 9.0]],
                    low=[[False] * 3, [False] * 3], high=[[False] * 3, [True, False, True]])
    got = sample_figures(SimpleNamespace(mask=MASK, entropy=ENTROPY), last, has_kl=True)
    assert got["kl_mean"] == pytest.approx([(0.09 + 0.9) / 6, 0.3 / 4])
    assert got["clipped_tokens"] == [2, 1]  # the padding's high clip is no token
    assert got["clip_frac"] == pytest.approx([2 / 6, 1 / 4])
    assert got["ratio_max"] == pytest.approx([1.3, 2.0])
    assert got["ratio_mean"] == pytest.approx([6.0 / 6, 5.0 / 4])
    assert got["entropy_mean"] == pytest.approx([0.6, 1.5])  # pi_old's: one forward, not a pass


def test_no_reference_means_no_kl_not_zero():
    got = sample_figures(SimpleNamespace(mask=MASK, entropy=ENTROPY), last_pass(), has_kl=False)
    assert got["kl_mean"] == [None, None]
    assert got["clipped_tokens"] == [2, 0]  # the other figures do not need a reference


def test_a_completion_without_a_last_pass_has_null_figures():
    """Dynamic sampling's dropped groups, or a step whose update was skipped: no ratio, no KL, no
    clipping to count (null, not 0); dropped groups had no forward pass either (entropy NaN)."""
    no_forward = torch.full_like(MASK, math.nan)
    got = sample_figures(SimpleNamespace(mask=MASK, entropy=no_forward), LastPass.unrecorded(MASK), has_kl=True)
    assert got == {"kl_mean": [None, None], "clipped_tokens": [None, None], "clip_frac": [None, None],
                   "ratio_mean": [None, None], "entropy_mean": [None, None], "ratio_max": [None, None]}


def _token_weighted(samples, column):
    return float((samples[column] * samples["length"]).sum() / samples["length"].sum())


def test_one_pass_per_sample_figures_add_up_to_the_steps_scalars(tiny_run):
    """One pass over one minibatch: the last pass is the step's only one, so the samples' figures
    weighted by their tokens are the step's kl/mean and entropy/mean (up to float32 sums)."""
    run = tiny_run("one-pass", max_steps=2, beta=0.04, seed=4, passes=1)
    samples, scalars = read_table(run, "samples"), read_table(run, "scalars").set_index("step")
    assert {"kl_mean", "clipped_tokens", "entropy_mean", "ratio_max"} <= set(samples.columns)
    for step, rows in samples.groupby("step"):
        row = scalars.loc[step]
        assert _token_weighted(rows, "kl_mean") == pytest.approx(row["kl/mean"], rel=1e-4, abs=1e-9)
        assert _token_weighted(rows, "entropy_mean") == pytest.approx(row["entropy/mean"], rel=1e-5)
        assert rows["ratio_max"].max() == pytest.approx(row["ratio/max"], rel=1e-6)
        assert rows["clipped_tokens"].sum() / rows["length"].sum() == pytest.approx(row["clip/total"], abs=1e-9)
    assert samples["kl_mean"].notna().all() and samples["entropy_mean"].gt(0).all()


def test_without_a_reference_kl_is_null_and_the_last_pass_holds_the_clipping(tiny_run):
    """beta 0: no reference, kl_mean null (never a 0 that reads as "no drift"). Two passes with a
    small epsilon: pass 1 has ratio 1 exactly and clips nothing, so every clipped token of the step
    is one of the last pass, and clip/total counts each token twice (once a pass)."""
    run = tiny_run("no-ref", max_steps=2, beta=0, seed=4, passes=2, epsilon=0.02)
    samples, scalars = read_table(run, "samples"), read_table(run, "scalars").set_index("step")
    assert samples["kl_mean"].isna().all()
    assert samples["clipped_tokens"].dtype.kind in "iu" and samples["clipped_tokens"].sum() > 0
    for step, rows in samples.groupby("step"):
        row = scalars.loc[step]
        assert (rows["clipped_tokens"] <= rows["length"]).all()
        assert rows["clipped_tokens"].sum() / (2 * rows["length"].sum()) == pytest.approx(row["clip/total"], abs=1e-9)
        assert max(1.0, rows["ratio_max"].max()) == pytest.approx(row["ratio/max"], rel=1e-6)


def test_several_passes_and_minibatches_add_back_to_each_steps_scalars(tiny_run):
    """Three passes over two minibatches with a reference: each step's samples give back its kl/mean,
    ratio/mean, entropy/mean (weighted by length), clip/total (their clipped tokens over passes x tokens)
    and ratio/max (their largest), to float rounding: the groups of a clicked point add up to it."""
    run = tiny_run("passes", max_steps=3, beta=0.04, seed=4, passes=3, minibatches=2, epsilon=0.05,
                   lr=3e-3)
    samples, scalars = read_table(run, "samples"), read_table(run, "scalars").set_index("step")
    for step, rows in samples.groupby("step"):
        row = scalars.loc[step]
        assert _token_weighted(rows, "kl_mean") == pytest.approx(row["kl/mean"], rel=1e-4, abs=1e-9)
        assert _token_weighted(rows, "ratio_mean") == pytest.approx(row["ratio/mean"], rel=1e-5)
        assert _token_weighted(rows, "entropy_mean") == pytest.approx(row["entropy/mean"], rel=1e-5)
        assert rows["clipped_tokens"].sum() / (3 * rows["length"].sum()) == pytest.approx(row["clip/total"], abs=1e-9)
        assert rows["ratio_max"].max() == pytest.approx(row["ratio/max"], rel=1e-6)
    assert scalars["clip/total"].max() > 0 and scalars["kl/mean"].max() > 0  # the sums were not 0 = 0
