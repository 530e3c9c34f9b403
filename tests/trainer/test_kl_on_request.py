"""KL measured on request: `measure_kl` with beta 0 loads the frozen reference only to
log the KL to it (kl/mean, samples' kl_mean: k3, as beta > 0 logs it); the loss has no KL term, so the
update is the one the run makes without it. Without the option nothing changes: no reference is loaded
and the KL stays absent (tests/trainer/test_kl_absent.py). Readers (Compare, variants) read such a run's KL as
measured."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from app_helpers import open_page
from grpo_lab.launching import launcher
from grpo_lab.trainer.config import from_dict, load_config
from grpo_lab.trainer.run import prepare, release, train
from trainer_helpers import read_table

STEPS = 3
# a length reward: the tiny model's random completions differ in length, so every step updates the policy
# (stop_on none: at the demo's lr PPO's tiny policy turns near uniform by step 3, which the doctor stops)
BASE = {"prompts_per_step": 4, "group_size": 4, "sft_steps": 20, "flush_seconds": 0, "beta": 0, "passes": 2,
        "max_steps": STEPS, "token_detail_groups": 4, "checkpoint_every": STEPS, "stop_on": "none",
        "rewards": {"length": 1.0}, "reward_params": {"length": {"min_len": 4, "penalty_per_unit": 0.25}}}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same seeded beta 0 runs, GRPO and PPO, without and with measure_kl: {name: run dir}."""
    root = tmp_path_factory.mktemp("runs")
    for algo in ("grpo", "ppo"):
        for on in (False, True):
            name = f"{algo}-{'on' if on else 'off'}"
            assert train(from_dict({**BASE, "algo": algo, "measure_kl": on, "runs_dir": str(root), "name": name})) == 0
    return root


def k3(logp: np.ndarray, ref_logp: np.ndarray) -> np.ndarray:
    """The chapter's per-token estimate, written out again: exp(ref - logp) - (ref - logp) - 1."""
    x = ref_logp - logp
    return np.exp(x) - x - 1


def test_measured_kl_is_the_k3_of_its_logged_log_probs(runs):
    scalars = read_table(runs / "grpo-on", "scalars").set_index("step")
    tokens, samples = read_table(runs / "grpo-on", "tokens"), read_table(runs / "grpo-on", "samples")
    assert len(scalars) == STEPS and np.isfinite(scalars["kl/mean"]).all() and scalars["kl/mean"].iloc[-1] > 0
    assert (scalars["time/ref_s"] > 0).all()  # a reference forward every step
    assert tokens["logp_ref"].notna().all()
    for step, t in tokens.groupby("step"):
        last = k3(t["logp_new"].to_numpy(), t["logp_ref"].to_numpy())
        np.testing.assert_allclose(t["kl"], last, rtol=1e-4, atol=1e-6)
        # every token is logged (token_detail_groups = the step's groups); 2 passes over one minibatch: the
        # first pass's policy is pi_old (ratio 1), the second's is the last pass's, each counting every token once
        first = k3(t["logp_old"].to_numpy(), t["logp_ref"].to_numpy())
        assert math.isclose(scalars.loc[step, "kl/mean"], (first.mean() + last.mean()) / 2, rel_tol=1e-4, abs_tol=1e-7)
        # each completion's kl_mean counts both passes' tokens, as kl/mean does
        per_completion = t.assign(k3=(first + last) / 2).groupby(["group", "sample_idx"])["k3"].mean()
        logged = samples[samples["step"] == step].set_index(["group", "sample_idx"])["kl_mean"]
        np.testing.assert_allclose(logged.loc[per_completion.index], per_completion, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_the_update_is_the_one_made_without_it(runs, algo):
    final = f"checkpoints/step-{STEPS:08d}/model.safetensors"
    off, on = load_file(str(runs / f"{algo}-off" / final)), load_file(str(runs / f"{algo}-on" / final))
    assert off.keys() == on.keys() and all(torch.equal(off[k], on[k]) for k in off)  # bit for bit
    a, b = read_table(runs / f"{algo}-off", "scalars"), read_table(runs / f"{algo}-on", "scalars")
    for column in ("reward/mean", "loss/total", "loss/policy", "grad/norm", "ratio/mean"):
        assert a[column].tolist() == b[column].tolist(), column
    assert "kl/mean" not in a and b["kl/mean"].notna().all()  # measured only where asked


def test_without_it_no_reference_is_loaded(tmp_path):
    """beta 0 loads no reference (its memory is saved); measure_kl loads a frozen one; with beta > 0 the
    option is redundant and accepted."""
    expected = {"plain": ({"beta": 0}, False), "asked": ({"beta": 0, "measure_kl": True}, True),
                "redundant": ({"beta": 0.04, "measure_kl": True}, True)}
    for name, (values, loaded) in expected.items():
        comps, _, _, _ = prepare(from_dict({"sft_steps": 0, "logging": "off", "runs_dir": str(tmp_path),
                                            "name": name, **values}))
        try:
            assert (comps.reference is not None) == loaded, name
            if loaded:
                assert not any(p.requires_grad for p in comps.reference.parameters())
        finally:
            release(comps)
    assert load_config(["--beta", "0", "--measure-kl"]).measure_kl is True
    assert load_config(["--beta", "0"]).measure_kl is False


def test_compare_reads_the_measured_kl_as_measured(runs, monkeypatch):
    from grpo_lab.dashboard.reading import data, variants_data
    from grpo_lab.dashboard.views.compare import compare_view, variants_view

    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    variants_data.st.cache_data.clear()
    logged = read_table(runs / "grpo-on", "scalars")["kl/mean"].iloc[-1]
    assert compare_view._scalars("grpo-on")["kl/mean"].iloc[-1] == logged
    key, problems = variants_data.data_key({"beta 0": [data.run("grpo-off")], "beta 0, KL measured": [data.run("grpo-on")]})
    per_run, _ = variants_data.stats(key, 0.5)
    final = per_run.set_index("variant")["final KL"]
    assert not problems and final["beta 0, KL measured"] == logged and math.isnan(final["beta 0"])
    line = variants_view.verdict_line(per_run, "beta 0", "beta 0, KL measured", "final KL")
    assert "**beta 0** did not measure" in line and "KL measured** did not" not in line
    # two variants that measured it are compared in it
    both = pd.DataFrame({"run": ["a", "b"], "variant": ["x", "y"], "final KL": [logged, logged + 0.1]})
    assert "did not measure" not in variants_view.verdict_line(both, "x", "y", "final KL")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_launch_form_offers_it(tmp_path, monkeypatch, lang):
    from grpo_lab.dashboard import i18n

    started = []
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    monkeypatch.setattr(launcher, "launch", lambda values, runs_dir, processes=1: started.append(values) or ("x", 1))
    at = open_page("runs", lang=lang)
    box = next(w for w in at.checkbox if w.key.startswith("launch_") and w.key.endswith("_measure_kl"))
    assert box.label == i18n.texts(lang)["option.measure_kl.label"] and box.value is False
    box.check()
    at.button[[b.label for b in at.button].index(i18n.texts(lang)["launch.submit"])].click().run()
    assert len(started) == 1 and started[0]["measure_kl"] is True
    argv = launcher.validate({**started[0], "beta": 0.0}, tmp_path)  # the trainer's command line
    assert "--measure-kl" in argv and load_config(argv).measure_kl is True
