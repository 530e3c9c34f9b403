"""The Compare page's cached path for variants (grpo_lab/dashboard/reading/variants_data.py: one
DuckDB query over every run's scalars, group-bys over it, cached on the parts' identities) gives the
same numbers as the direct computation: each run read on its own with the run-directory reader,
deduplicated by step as data.scalars does, and rundir.variants' band / per_run / summary_table per
variant. Real Parquet written with the run-directory writer; no trainer, no browser."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from grpo_lab.dashboard.reading import variants_data
from grpo_lab.rundir import variants
from grpo_lab.rundir.layout import RunPaths
from grpo_lab.rewards.registry import reward_range
from grpo_lab.rundir.metrics import value_bounds
from grpo_lab.rundir.reader import TableReader, list_runs
from grpo_lab.rundir.writer import RunWriter
from variants_helpers import write_run, write_sweep

SWEEP = {"beta=0": 0.2, "beta=0.04": 0.8, "beta=0.1": 0.5}


def resume_with_overlap(root, name: str) -> None:
    """A second part for steps 10..15 of a 12-step run, as a resume from step 9 writes it: steps 10-12
    are written twice, and the later part's rows are the ones that count."""
    writer = RunWriter(RunPaths(root / name), level="scalars", flush_seconds=0)
    x = np.arange(10, 16)
    writer.log("scalars", {"step": x.tolist(), "time": (1.8e9 + x).tolist(), "wall_s": (x * 3.0).tolist(),
                           "reward/mean": (0.9 + x / 100).tolist(), "kl/mean": (0.02 * x).tolist(),
                           "completion/length_mean": [4.0] * len(x), "time/step_s": [3.0] * len(x)})
    writer.close()


@pytest.fixture()
def runs(tmp_path, monkeypatch):
    write_sweep(tmp_path, "s", SWEEP, seeds=3, steps=12)
    resume_with_overlap(tmp_path, "s-beta_0.04-s1")
    write_run(tmp_path, "other-base-s0", "other", "base", 0, 0.5)  # another sweep: never read here
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    variants_data.st.cache_data.clear()
    return tmp_path


def groups(root) -> dict:
    out: dict = {}
    for r in sorted((r for r in list_runs(root) if r.config.get("sweep") == "s"),
                    key=lambda r: (r.config["variant"], r.config["seed"])):
        out.setdefault(r.config["variant"], []).append(r)
    return out


def direct(root, x_mode: str, metric: str, threshold: float) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(bands, per-run statistics, summary table) computed run by run, as the page did before."""
    parts, band_parts = [], []
    for label, rs in groups(root).items():
        for r in rs:
            df = TableReader(root / r.name, "scalars").read().table.to_pandas()
            df = df.sort_values("step", kind="stable").drop_duplicates("step", keep="last").reset_index(drop=True)
            per_step = r.config["prompts_per_step"] * r.config["group_size"]
            parts.append(pd.DataFrame({"variant": label, "run": r.name, "step": df["step"],
                                       "x": variants.x_axis(df, per_step, x_mode), metric: df[metric],
                                       "reward/mean": df["reward/mean"], "kl/mean": df["kl/mean"]}))
    long = pd.concat(parts, ignore_index=True)
    for label, part in long.groupby("variant", sort=False):
        bounds = value_bounds(metric)  # a total reward: also the range its rewards allow (reward/mean has no other)
        if metric in variants_data.TOTAL_REWARDS:
            bounds = reward_range(groups(root)[label][0].config["rewards"])
        b = variants.band(part.rename(columns={metric: "value"})[["run", "step", "value"]], "step", bounds)
        b["x"] = b["step"].map(part.groupby("step")["x"].mean())
        b["variant"] = label
        band_parts.append(b)
    reward = long[["run", "step", "reward/mean"]].rename(columns={"reward/mean": "value"})
    kl = long[["run", "step", "kl/mean"]].rename(columns={"kl/mean": "value"})
    per_run = variants.per_run(reward, kl, threshold).merge(long[["run", "variant"]].drop_duplicates("run"), on="run")
    table = variants.summary_table(per_run, {label: [r.name for r in rs] for label, rs in groups(root).items()})
    return pd.concat(band_parts, ignore_index=True), per_run, table


def cached(root, x_mode: str, metric: str, threshold: float):
    key, problems = variants_data.data_key(groups(root))
    assert problems == []
    band, _ = variants_data.bands(key, metric, x_mode, seeds=False)
    per_run, table = variants_data.stats(key, threshold)
    return band, per_run, table


@pytest.mark.parametrize("x_mode", variants.X_MODES)
def test_the_cached_path_gives_the_direct_tables(runs, x_mode):
    for metric in ("reward/mean", "kl/mean"):
        want_band, want_runs, want_table = direct(runs, x_mode, metric, 0.5)
        band, per_run, table = cached(runs, x_mode, metric, 0.5)
        pd.testing.assert_frame_equal(band, want_band[band.columns], check_dtype=False)
        pd.testing.assert_frame_equal(per_run, want_runs, check_dtype=False)
        pd.testing.assert_frame_equal(table, want_table, check_dtype=False)
    # the resumed run's steps 10-12 are its second part's (reward 0.9 + step / 100), and it has 15 steps
    row = per_run.set_index("run").loc["s-beta_0.04-s1"]
    assert row["final reward"] == pytest.approx(0.9 + 15 / 100)
    resumed = band[band["variant"] == "beta=0.04"]
    assert len(resumed) == 15 and resumed["n"].tolist()[-1] == 1  # steps 13-15: one seed has them
    assert sorted(set(per_run["variant"])) == sorted(SWEEP)  # the other sweep's run is not read


def test_a_new_part_changes_the_key_and_the_tables(runs):
    before = cached(runs, "step", "reward/mean", 0.5)
    again = cached(runs, "step", "reward/mean", 0.5)  # nothing new: the same tables
    pd.testing.assert_frame_equal(before[2], again[2])
    resume_with_overlap(runs, "s-beta_0-s2")  # a part appears: its run now ends at step 15, reward 1.05
    band, per_run, table = cached(runs, "step", "reward/mean", 0.5)
    assert per_run.set_index("run").loc["s-beta_0-s2", "final reward"] == pytest.approx(1.05)
    pd.testing.assert_frame_equal(table, direct(runs, "step", "reward/mean", 0.5)[2], check_dtype=False)
    assert not table.equals(before[2])


def test_long_runs_are_thinned_for_the_chart_but_not_for_the_statistics(tmp_path, monkeypatch):
    write_sweep(tmp_path, "s", {"a": 0.5, "b": 0.7}, seeds=2, steps=3000)
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    variants_data.st.cache_data.clear()
    key, _ = variants_data.data_key(groups(tmp_path))
    band, seeds = variants_data.bands(key, "reward/mean", "step", seeds=True)
    full, want_runs, _ = direct(tmp_path, "step", "reward/mean", 0.5)
    for label, part in band.groupby("variant"):
        whole = full[full["variant"] == label]
        assert len(part) <= variants_data.MAX_BAND_POINTS + 2 < len(whole)
        assert part["step"].iloc[0] == 1 and part["step"].iloc[-1] == 3000  # both ends
        assert part["mean"].max() == whole["mean"].max() and part["mean"].min() == whole["mean"].min()  # the peaks
        kept = whole.set_index("step").loc[part["step"]]
        assert np.allclose(part[["mean", "low", "high"]].to_numpy(), kept[["mean", "low", "high"]].to_numpy())
    assert seeds.groupby("run").size().max() <= variants_data.MAX_BAND_POINTS + 2
    per_run, _ = variants_data.stats(key, 0.5)  # every step, not the thinned ones
    pd.testing.assert_frame_equal(per_run, want_runs, check_dtype=False)


@pytest.mark.parametrize("where", ["footer", "pages"])
def test_a_damaged_part_is_reported_and_the_other_runs_still_read(runs, where):
    part = next((runs / "s-beta_0-s0" / "tables" / "scalars").glob("*.parquet"))
    data = part.read_bytes()
    footer = 8 + int.from_bytes(data[-8:-4], "little")  # metadata length, "PAR1"
    if where == "footer":
        part.write_bytes(b"PAR1 garbage")  # usable_parts finds it
    else:  # the footer reads, the pages do not: the one query fails, each run is then read alone
        part.write_bytes(data[:4] + b"\xff" * (len(data) - 4 - footer) + data[-footer:])
    key, problems = variants_data.data_key(groups(runs))
    problems += variants_data.present(key)[1]
    # named with its run ("scalars/<part> could not be read", or rundir.query's "scalars: query failed")
    assert any(p.startswith("s-beta_0-s0: scalars") for p in problems), problems
    per_run, _ = variants_data.stats(key, 0.5)
    assert "s-beta_0-s0" not in set(per_run["run"]) and len(per_run) == 8
