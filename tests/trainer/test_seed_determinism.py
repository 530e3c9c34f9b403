"""Each seed is a real seed: the same config and seed twice on one CPU process gives the same run,
and another seed a different one. One twin is a fresh `python -m grpo_lab.trainer`, the other a fork of
the tests' trainer server (tests/trainer_fork.py): the fork the other tests use trains as the command does. Only wall-clock columns may differ between the twins: `time`
(a timestamp), `wall_s`, `time/*` (step timings) and `perf/*` (throughput, computed from them)."""

from __future__ import annotations

import pandas as pd

from trainer_helpers import read_table

FLAGS = {"max_steps": 2, "device": "cpu", "beta": 0.04}


def _not_clock(df: pd.DataFrame) -> pd.DataFrame:
    clock = [c for c in df.columns if c in ("time", "wall_s") or c.startswith(("time/", "perf/"))]
    return df.drop(columns=clock).sort_values("step", kind="stable").reset_index(drop=True)


def test_same_seed_same_run_other_seed_other_run(tiny_run):
    a, b = tiny_run("twin-a", seed=7, fresh=True, **FLAGS), tiny_run("twin-b", seed=7, **FLAGS)
    c = tiny_run("other", seed=8, **FLAGS)
    sa, sb, sc = (_not_clock(read_table(d, "scalars")) for d in (a, b, c))
    assert {"reward/mean", "kl/mean", "loss/policy", "grad/norm"} <= set(sa.columns)
    pd.testing.assert_frame_equal(sa, sb, check_exact=True)  # bit for bit, not approximately

    keys = ["step", "group", "sample_idx"]
    ca, cb, cc = (read_table(d, "samples").sort_values(keys).reset_index(drop=True) for d in (a, b, c))
    same = ["prompt", "completion", "reward", "advantage"]
    pd.testing.assert_frame_equal(ca[same], cb[same], check_exact=True)
    # another seed draws other prompts or samples other completions
    assert not (ca["prompt"].equals(cc["prompt"]) and ca["completion"].equals(cc["completion"]))
