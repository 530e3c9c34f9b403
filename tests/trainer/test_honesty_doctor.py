"""The run doctor's reward-hacking findings (grpo_lab/trainer/doctor.py, honesty_failures) on planted step
figures: each fires once its figure has held over HONESTY_STEPS steps, names the reward or figure, and
stays quiet on an honest run's figures (the verifier deciding, a weak length correlation, memorising)."""

import math

import pytest

from grpo_lab.trainer import doctor
from grpo_lab.trainer.doctor import Doctor

HEALTHY = {"loss/total": 0.1, "loss/policy": 0.1, "grad/norm": 2.0, "kl/mean": 0.5, "ratio/max": 3.0,
           "entropy/mean": 0.5, "reward/std": 0.3, "groups/frac_zero_std": 0.5, "completion/truncated_frac": 0.0,
           "completion/repetitive_frac": 0.0}
HONEST = {**HEALTHY, "honesty/correctness/sign_share": 0.9, "honesty/format/sign_share": 0.1,
          "honesty/correctness/reward_share": 0.7, "honesty/format/reward_share": 0.3, "honesty/length_corr": 0.2,
          "honesty/strict_fail_frac": 0.05, "honesty/groups_none_solved": 0.1, "honesty/group_spread_ratio": 0.5}


def run(steps: list[dict]) -> list[tuple[int, str]]:
    d = Doctor(lr=2e-3, max_grad_norm=1.0, pretrained=False, vocab_size=50, trained_params=100_000)
    return [(f.step, f.kind) for step, m in enumerate(steps, 1) for f in d.check(step, m)]


def test_an_honest_run_raises_nothing():
    eval_step = {**HONEST, "honesty/reward_gain": 3.0, "honesty/eval_accuracy_gain": 0.2}
    assert run([HONEST] * 30 + [eval_step]) == []


@pytest.mark.parametrize("change, kind", [
    ({"honesty/correctness/sign_share": 0.1, "honesty/format/sign_share": 0.9}, "reward_dominated_by"),
    ({"honesty/length_corr": 0.9}, "reward_tracks_length"),
    ({"honesty/strict_fail_frac": 0.75}, "strict_check_disagrees"),
])
def test_a_lasting_sign_fires_once_its_windows_mean_crosses(change, kind):
    bad = {**HONEST, **change}
    assert run([bad] * (doctor.HONESTY_STEPS - 1)) == []  # never before the window is full
    found = run([HONEST] * 5 + [bad] * 20)
    assert len(found) == 1 and found[0][1] == kind
    assert 5 < found[0][0] <= 5 + doctor.HONESTY_STEPS  # the mean of the last steps, not one noisy step


def test_the_verifier_deciding_every_sign_is_no_finding():
    assert run([{**HONEST, "honesty/correctness/sign_share": 1.0, "honesty/format/sign_share": 0.0}] * 20) == []


def test_the_message_names_the_reward_and_the_groups_to_read():
    d = Doctor(lr=2e-3, max_grad_norm=1.0, pretrained=False, vocab_size=50, trained_params=100_000)
    bad = {**HONEST, "honesty/correctness/sign_share": 0.05, "honesty/format/sign_share": 0.95}
    found = [f for step in range(1, 11) for f in d.check(step, bad)]
    assert [f.kind for f in found] == ["reward_dominated_by"]
    assert "'format' decides 95%" in found[0].message and "correctness 5%" in found[0].message
    assert "hacking suspects" in found[0].message and "'format'" in found[0].suggestion


def test_eval_divergence_needs_a_reward_beside_the_verifier():
    step = {"honesty/reward_gain": 2.0, "honesty/eval_accuracy_gain": 0.0}
    assert run([{**HONEST, **step}]) == [(1, "eval_diverges")]
    alone = {k: v for k, v in HONEST.items() if "/format/" not in k and "/correctness/" not in k}
    memorising = {**alone, "honesty/correctness/reward_share": 1.0, "honesty/correctness/sign_share": 1.0, **step}
    assert run([memorising]) == []
    assert run([{**HONEST, "honesty/reward_gain": 2.0, "honesty/eval_accuracy_gain": 0.1}]) == []


def test_collapse_on_unsolved_groups_only():
    collapsed = {**HONEST, "honesty/group_spread_ratio": 0.1}
    assert run([collapsed] * 10) == []  # the groups are solved: a converged run
    assert run([{**collapsed, "honesty/groups_none_solved": 0.8}] * 10) == [(10, "reward_collapse")]


def test_nan_figures_never_fire():
    nan = {k: (math.nan if k.startswith("honesty/") else v) for k, v in HONEST.items()}
    assert run([nan] * 20) == []


def test_steps_without_the_figure_do_not_hide_it_unless_most_lack_it():
    """A hack that saturates leaves its last steps without signs or checks (NaN): the window's other steps count."""
    bad = {**HONEST, "honesty/strict_fail_frac": 1.0}
    saturated = {**HONEST, "honesty/strict_fail_frac": math.nan}
    assert run([bad] * 6 + [saturated] * 4) == [(10, "strict_check_disagrees")]
    assert run([bad] * 4 + [saturated] * 6) == []


def test_eval_divergence_is_reported_once_while_it_lasts_between_evaluations():
    evaluated = {**HONEST, "honesty/reward_gain": 2.0, "honesty/eval_accuracy_gain": 0.0}
    assert run(([HONEST] * 4 + [evaluated]) * 4) == [(5, "eval_diverges")]
