"""The sampler against the trainer (objective/mismatch.py): the figures and the corrections on worked numbers,
a mismatch made on purpose (the sampler draws at one temperature, the trainer scores at another) and what a
correction does with it, the default path's gap (0 to float rounding on a CPU), and runs that log it."""

from __future__ import annotations

import math

import pytest
import torch

from grpo_lab.objective import mismatch
from grpo_lab.objective.functions import grpo_loss
from grpo_lab.rundir.importers.names import metric_name
from grpo_lab.trainer import tiny
from grpo_lab.trainer.decode import Sampling
from grpo_lab.trainer.rollout import sample, token_logprobs
from trainer_helpers import read_table

LOG = math.log
MASK = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
# w per token: 1, 2, 0.5 | 1.05, 4 (padding left out)
TRAIN = torch.log(torch.tensor([[0.4, 0.6, 0.1, 0.9], [0.21, 0.8, 0.5, 0.5]]))
SAMPLER = torch.log(torch.tensor([[0.4, 0.3, 0.2, 0.1], [0.2, 0.2, 0.5, 0.5]]))


def test_the_figures_on_worked_numbers():
    f = mismatch.figures(TRAIN, SAMPLER, MASK)
    w = torch.tensor([1.0, 2.0, 0.5, 1.05, 4.0])
    assert f["ratio_mean"] == pytest.approx(float(w.mean()))
    assert (f["ratio_min"], f["ratio_max"]) == (pytest.approx(0.5), pytest.approx(4.0))
    assert f["out_frac"] == pytest.approx(3 / 5)  # 2, 0.5 and 4 leave [0.9, 1.1]; 1.05 does not
    assert f["logp_diff_max"] == pytest.approx(LOG(4))
    assert f["logp_diff_mean"] == pytest.approx((0 + LOG(2) + LOG(2) + LOG(1.05) + LOG(4)) / 5)
    assert f["kl"] == pytest.approx(float((w - 1 - w.log()).mean()))
    assert f["weight_mean"] == 1.0 and f["masked_frac"] == 0.0  # no correction: every weight 1


def test_the_four_corrections():
    w = mismatch.weights(TRAIN, SAMPLER, MASK, "token_truncate", cap_max=3.0, cap_min=0.8)
    assert w[0, :3].tolist() == pytest.approx([1.0, 2.0, 0.8]) and w[1, :2].tolist() == pytest.approx([1.05, 3.0])
    w = mismatch.weights(TRAIN, SAMPLER, MASK, "token_mask", cap_max=3.0, cap_min=0.8)
    assert w[0, :3].tolist() == pytest.approx([1.0, 2.0, 0.0]) and w[1, :2].tolist() == pytest.approx([1.05, 0.0])
    # sequences: row 0's product is 1 x 2 x 0.5 = 1, row 1's 1.05 x 4 = 4.2
    w = mismatch.weights(TRAIN, SAMPLER, MASK, "sequence_truncate", cap_max=3.0)
    assert w[:, 0].tolist() == pytest.approx([1.0, 3.0]) and (w[1] == w[1, 0]).all()
    w = mismatch.weights(TRAIN, SAMPLER, MASK, "sequence_mask", cap_max=3.0)
    assert w[:, 0].tolist() == pytest.approx([1.0, 0.0])
    assert mismatch.weights(TRAIN, SAMPLER, MASK, "none") is None
    applied = mismatch.weights(TRAIN, SAMPLER, MASK, "token_mask", cap_max=3.0, cap_min=0.8)
    f = mismatch.figures(TRAIN, SAMPLER, MASK, applied)
    assert f["masked_frac"] == pytest.approx(2 / 5) and f["weight_max"] == pytest.approx(2.0)


def test_a_weight_scales_the_clipped_term_not_the_kl():
    """TRL's order: the importance weight multiplies each token's policy term; beta x KL is added after."""
    logp, old = torch.log(torch.tensor([[0.5, 0.5]])), torch.log(torch.tensor([[0.5, 0.5]]))
    ref = torch.log(torch.tensor([[0.25, 0.75]]))
    from grpo_lab.objective.options import LossSettings
    settings = LossSettings(beta=0.1, aggregation="token")
    plain = grpo_loss(logp, old, ref, torch.tensor([1.0]), torch.ones(1, 2), settings)
    half = grpo_loss(logp, old, ref, torch.tensor([1.0]), torch.ones(1, 2), settings,
                     sampler_weight=torch.full((1, 2), 0.5))
    assert half.policy_loss == pytest.approx(0.5 * plain.policy_loss)
    kl_part = plain.loss - plain.policy_loss
    assert half.loss - half.policy_loss == pytest.approx(kl_part)


def test_nan_sampler_logprobs_and_tokens_without_pi_old_are_left_out():
    sampler = SAMPLER.clone()
    sampler[1] = math.nan  # a row the sampler gave no log-prob for
    f = mismatch.figures(TRAIN, sampler, MASK)
    assert f["ratio_max"] == pytest.approx(2.0) and f["out_frac"] == pytest.approx(2 / 3)
    assert math.isnan(mismatch.per_completion(TRAIN, sampler, MASK)[1])
    assert all(math.isnan(v) for v in mismatch.figures(TRAIN, torch.full_like(SAMPLER, math.nan), MASK).values())


# --- a model: the sampler's log-probs against the trainer's ---------------------------------------------


@pytest.fixture(scope="module")
def drawn():
    tokenizer = tiny.build_tokenizer()
    model = tiny.build_model(tokenizer, seed=0).eval()
    torch.manual_seed(1)
    rollout = sample(model, tokenizer, ["1+2=", "13+4=", "3+4="], Sampling(4, 12, temperature=1.0), torch.device("cpu"))
    return model, rollout


def test_the_default_path_has_no_gap_to_float_rounding(drawn):
    model, rollout = drawn
    with torch.no_grad():
        trained, _ = token_logprobs(model, rollout, 1.0)
    f = mismatch.figures(trained, rollout.sampler_logp, rollout.completion_mask)
    assert f["logp_diff_max"] < 1e-4 and f["out_frac"] == 0.0 and abs(f["ratio_mean"] - 1) < 1e-5


def test_a_temperature_mistake_shows_and_a_correction_bounds_it(drawn):
    """The sampler drew at temperature 1, the trainer scores at 0.5: a classic mismatch (the engine's
    temperature not the trainer's). The figures see it, token_truncate caps the weights, token_mask drops
    the tokens beyond the caps."""
    model, rollout = drawn
    with torch.no_grad():
        trained, _ = token_logprobs(model, rollout, 0.5)
    m = rollout.completion_mask
    f = mismatch.figures(trained, rollout.sampler_logp, m)
    assert f["out_frac"] > 0.3 and f["logp_diff_mean"] > 0.05 and f["kl"] > 0.01
    truncated = mismatch.weights(trained, rollout.sampler_logp, m, "token_truncate", cap_max=1.5, cap_min=0.5)
    real = m.bool()
    assert truncated[real].max() <= 1.5 and truncated[real].min() >= 0.5
    masked = mismatch.weights(trained, rollout.sampler_logp, m, "token_mask", cap_max=1.5, cap_min=0.5)
    dropped = mismatch.figures(trained, rollout.sampler_logp, m, masked)["masked_frac"]
    outside = ((trained - rollout.sampler_logp).exp()[real] > 1.5) | ((trained - rollout.sampler_logp).exp()[real] < 0.5)
    assert dropped == pytest.approx(float(outside.float().mean())) and dropped > 0


def test_trl_sampling_figures_import_as_ours():
    assert metric_name("sampling/sampling_logp_difference/mean") == "mismatch/logp_diff_mean"
    assert metric_name("sampling/importance_sampling_ratio/max") == "mismatch/weight_max"


# --- runs -------------------------------------------------------------------------------------------


def test_a_run_logs_the_gap_near_zero_and_a_correction_changes_nothing_then(tiny_run):
    """This trainer's sampler is its own forward: every mismatch figure is 0 (w 1) to rounding, and with
    token_mask on nothing is masked and every weight is 1."""
    run = tiny_run("mask", max_steps=2, seed=3, passes=2, mismatch_correction="token_mask", mismatch_cap=1.5)
    scalars, samples = read_table(run, "scalars"), read_table(run, "samples")
    assert (scalars["mismatch/logp_diff_max"] < 1e-4).all()
    assert (scalars["mismatch/masked_frac"] == 0).all() and (scalars["mismatch/weight_mean"] - 1).abs().max() < 1e-4
    assert samples["mismatch_mean"].notna().all() and (samples["mismatch_mean"] < 1e-4).all()


def test_live_says_a_self_sampled_run_has_no_gap_and_groups_order_by_it(tiny_run, monkeypatch):
    """The gap by token position is still read (every kept token), but a run whose sampler is its trainer
    gets one line on Live instead of charts of round-off."""
    from app_helpers import open_page

    from grpo_lab.dashboard.reading import queries
    from grpo_lab.dashboard.views.live import live_view

    run = tiny_run("seen", max_steps=2, seed=3)
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(run.parent))
    at = open_page("live", run="seen", **{live_view.open_key(live_view.BY_POSITION): True})
    assert not at.exception
    frame, problems = queries.mismatch_by_position("seen", live_view.POSITION_STEPS)
    tokens = read_table(run, "tokens")
    assert problems == [] and int(frame["tokens"].sum()) == len(tokens)  # every kept token, by its position
    assert frame["logp_diff_mean"].max() < 1e-4
    assert any("the sampler is the trainer, no gap" in str(e.value) for e in at.caption)
    at = open_page("groups", run="seen")
    at.selectbox(key="groups_sort@en").set_value("mismatch").run()
    assert not at.exception and not at.warning
