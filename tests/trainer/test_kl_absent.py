"""KL a run did not measure is absent, never 0: a beta = 0 run has no reference model.

The trainer writes no kl/mean for it (as a step without an update has none); readers drop it for runs whose config says beta 0 (runs logged
before this fix wrote 0); a verdict between a variant that measured KL and one that did not says so."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from grpo_lab.dashboard.views.compare import variants_view
from grpo_lab.rundir import variants
from shared_runs import one_pass_run  # noqa: F401 (a fixture: pytest finds it by name)
from trainer_helpers import read_table


def test_a_beta_0_run_logs_no_kl(one_pass_run):
    # the shared beta 0 run (2 steps; its one pass does not matter: without a reference the old code
    # logged kl/mean 0.0 whatever the passes)
    scalars = read_table(one_pass_run, "scalars")
    assert "kl/mean" not in scalars or scalars["kl/mean"].isna().all()  # was 0.0: read as a measured 0 by Compare
    assert scalars["ratio/mean"].notna().all()  # what it did measure is there


def test_readers_drop_what_a_config_did_not_measure():
    assert variants.unmeasured({"beta": 0}) == {"kl/mean"} and variants.unmeasured({"beta": 0.0}) == {"kl/mean"}
    assert variants.unmeasured({"beta": 0.04}) == set() and variants.unmeasured({"beta": False}) == set()
    assert not variants.measured([np.nan, np.nan]) and variants.measured([np.nan, 0.0])
    reward = pd.DataFrame({"run": ["a", "a"], "step": [1, 2], "value": [0.1, 0.2]})
    kl = pd.DataFrame({"run": ["a", "a"], "step": [1, 2], "value": [np.nan, np.nan]})
    assert math.isnan(variants.per_run(reward, kl)["final KL"].iloc[0])  # absent, not 0


@pytest.mark.parametrize(("lang", "said"), [
    ("en", "**beta=0** did not measure final KL (beta = 0: no reference model)"),
    ("zh", "**beta=0** 没有测量")])
def test_a_verdict_with_an_unmeasured_side_says_so(monkeypatch, lang, said):
    from grpo_lab.dashboard import i18n

    monkeypatch.setattr(i18n, "lang", lambda: lang)
    runs = pd.DataFrame({"run": ["z1", "z2", "k1", "k2"], "variant": ["beta=0", "beta=0", "beta=0.04", "beta=0.04"],
                         "final KL": [np.nan, np.nan, 0.33, 0.35], "final reward": [0.5, 0.6, 0.5, 0.7]})
    line = variants_view.verdict_line(runs, "beta=0", "beta=0.04", "final KL")
    assert said in line and "higher" not in line and "0.339" not in line
    assert "did not measure" not in variants_view.verdict_line(runs, "beta=0", "beta=0.04", "final reward")
