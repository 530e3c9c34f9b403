"""The run doctor: each check at its documented threshold, reported once while it lasts, and a
forced divergence on the built-in model that is logged and, with --stop-on, stops the run."""

import json
import math

import pytest

from grpo_lab.rundir.status import read_status
from grpo_lab.trainer import doctor
from grpo_lab.trainer.doctor import Doctor, Finding, stops
from trainer_helpers import SMALL, read_table, run_trainer

HEALTHY = {"loss/total": 0.1, "loss/policy": 0.1, "grad/norm": 2.0, "kl/mean": 0.5, "ratio/max": 3.0,
           "entropy/mean": 0.5, "reward/std": 0.3, "groups/frac_zero_std": 0.5, "completion/truncated_frac": 0.0,
           "completion/repetitive_frac": 0.0}


def make(pretrained=False, lr=2e-3):
    return Doctor(lr=lr, max_grad_norm=1.0, pretrained=pretrained, vocab_size=50, trained_params=135_000_000)


def kinds(findings):
    return [f.kind for f in findings]


@pytest.mark.parametrize("metric, below, above, kind, severity", [
    ("kl/mean", doctor.KL_WARNING * 0.99, doctor.KL_WARNING * 1.01, "kl_explosion", "warning"),
    ("kl/mean", doctor.KL_WARNING * 0.99, doctor.KL_CRITICAL * 1.01, "kl_explosion", "critical"),
    ("ratio/max", doctor.RATIO_WARNING * 0.99, doctor.RATIO_WARNING * 1.01, "ratio_explosion", "warning"),
    ("grad/norm", doctor.GRAD_FACTOR * 0.99, doctor.GRAD_FACTOR * 1.01, "grad_explosion", "warning"),
    ("entropy/mean", doctor.ENTROPY_LOW * 1.01, doctor.ENTROPY_LOW * 0.99, "entropy_collapse", "warning"),
    ("completion/repetitive_frac", 0.5, 0.51, "degenerate_text", "warning"),
    ("completion/truncated_rewarded_frac", doctor.REWARDED_TRUNCATED, 0.03, "rewarded_truncation", "warning"),
    ("loss/total", 1e30, math.inf, "non_finite", "critical"),
    ("grad/norm", 1.0, math.nan, "non_finite", "critical"),
])
def test_each_check_fires_above_its_threshold_only(metric, below, above, kind, severity):
    d = make()
    assert d.check(1, {**HEALTHY, metric: below}) == []
    found = d.check(2, {**HEALTHY, metric: above})
    assert [(f.kind, f.severity, f.step) for f in found] == [(kind, severity, 2)]
    assert found[0].message and found[0].suggestion


def test_a_condition_is_reported_once_while_it_lasts_and_again_after_it_clears():
    d = make()
    bad = {**HEALTHY, "kl/mean": 50.0}
    assert kinds(d.check(1, bad)) == ["kl_explosion"]
    assert d.check(2, bad) == [] and d.check(3, HEALTHY) == []
    assert kinds(d.check(4, bad)) == ["kl_explosion"]


def test_streaks_need_their_length_in_a_row():
    d = make()
    flat = {**HEALTHY, "reward/std": 0.0}
    for step in range(1, doctor.STUCK_STEPS):
        assert d.check(step, flat) == []
    assert kinds(d.check(doctor.STUCK_STEPS, flat)) == ["reward_constant"]
    d = make()
    no_signal = {**HEALTHY, "groups/frac_zero_std": 1.0}
    found = [kinds(d.check(s, no_signal if s != 5 else HEALTHY)) for s in range(1, doctor.NO_SIGNAL_STEPS + 6)]
    assert found.index(["no_signal"]) == 5 + doctor.NO_SIGNAL_STEPS - 1  # counted again after step 5 broke it
    d = make()
    cut = {**HEALTHY, "completion/truncated_frac": 1.0}
    assert [kinds(d.check(s, cut)) for s in range(1, 6)][-1] == ["all_truncated"]


def test_entropy_explosion_is_a_rise_to_noise_not_an_untrained_start():
    d = make()
    near_uniform = 0.95 * math.log(50)
    assert d.check(1, {**HEALTHY, "entropy/mean": near_uniform}) == []  # it started there: nothing new
    d = make()
    assert d.check(1, HEALTHY) == []
    assert kinds(d.check(2, {**HEALTHY, "entropy/mean": near_uniform})) == ["entropy_explosion"]


def test_a_step_nobody_rated_in_time_is_a_warning_that_does_not_stop_the_run():
    """The human reward's wait ended with no group rated: the page promised the run goes on, so it does
    (a warning); the same NaN mean without the wait, or with a failing reward, stays critical."""
    unrated = {**HEALTHY, "reward/mean": math.nan, "rewards/human/none_frac": 1.0, "rewards/human/errors": 0.0,
               "rewards/log/human_wait_s": 300.0}
    found = make().check(2, unrated)
    assert kinds(found) == ["ratings_missing"] and found[0].severity == "warning"
    assert "300 s" in found[0].message and "wait_s" in found[0].suggestion
    assert not stops(found[0], "critical")
    no_wait = {k: v for k, v in unrated.items() if k != "rewards/log/human_wait_s"}
    assert [(f.kind, f.severity) for f in make().check(2, no_wait)] == [("reward_unscored", "critical")]
    failing = {**unrated, "rewards/human/errors": 3.0}
    assert "ratings_missing" not in kinds(make().check(2, failing))


def test_a_pretrained_model_with_the_demo_learning_rate_is_told_the_fix():
    d = make(pretrained=True, lr=2e-3)
    found = d.check(1, {**HEALTHY, "kl/mean": 1.8e14, "grad/norm": 2.4e15})
    assert kinds(found) == ["kl_explosion", "grad_explosion", "high_lr"]
    assert "learning rate 0.002 is high for a 135M-parameter pretrained model" in found[0].suggestion
    assert not any(f.kind == "high_lr" for f in make(pretrained=True, lr=1e-5).check(1, HEALTHY))


def test_stop_on_compares_severities():
    warn, crit = (Finding(1, "k", sev, "m", "s") for sev in ("warning", "critical"))
    assert not stops(crit, "none") and stops(crit, "critical") and not stops(warn, "critical")
    assert stops(warn, "warning") and stops(crit, "warning")


def test_a_forced_divergence_is_logged_and_stop_on_stops_before_the_damage_is_saved(tmp_path):
    args = [*SMALL, "--max-steps", "8", "--lr", "1", "--checkpoint-every", "100"]  # the largest lr allowed
    # --stop-on none: the finding is logged; the broken weights then fail at the next sampling step
    result = run_trainer(tmp_path, "logged", *args, "--stop-on", "none")
    events = read_table(tmp_path / "logged", "events")
    assert "critical" in set(events["severity"]), events
    status = read_status(tmp_path / "logged" / "status.json")
    if result.returncode:  # NaN weights cannot sample: the error names the doctor's finding too
        assert status["state"] == "failed" and "run doctor" in status["error"]

    result = run_trainer(tmp_path, "halted", *args)  # the default: --stop-on critical
    assert result.returncode == 3, result.stderr  # stopped by the doctor (grpo_lab/trainer/outcome.py)
    status = read_status(tmp_path / "halted" / "status.json")
    first = read_table(tmp_path / "halted", "events").query("severity == 'critical'").iloc[0]
    assert status["state"] == "stopped" and status["step"] == first["step"] < 8
    assert status["stop_reason"].startswith(f"doctor ({first['kind']}, critical) at step {first['step']}")
    assert status["findings"]["critical"] >= 1
    # no checkpoint of the broken weights: resume starts from the one before (here the initial policy)
    assert sorted(p.name for p in (tmp_path / "halted" / "checkpoints").iterdir()) == ["initial"]
    assert json.loads((tmp_path / "halted" / "config.json").read_text())["stop_on"] == "critical"
