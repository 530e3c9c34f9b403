"""End to end: a real (tiny) run writes a run directory that pandas and DuckDB read back correctly."""

import json
import math

import duckdb
import pytest
import torch

from grpo_lab.rundir.status import read_status
from grpo_lab.objective.functions import group_advantages
from shared_runs import grpo_run, one_pass_run  # noqa: F401 (fixtures: pytest finds them by name)
from trainer_helpers import always_filled, read_table, registered_metrics


@pytest.fixture
def run_dir(grpo_run):
    """The session's shared GRPO run (shared_runs.GRPO_FLAGS: 6 steps, a checkpoint every 3)."""
    return grpo_run


def test_status_and_config(run_dir):
    status = read_status(run_dir / "status.json")
    assert status["state"] == "finished" and status["step"] == 6 and status["total_steps"] == 6
    assert status["error"] is None and status["trained_params"] > 0
    config = json.loads((run_dir / "config.json").read_text())
    assert config["group_size"] == 4 and config["std_mode"] == "group" and config["name"] == run_dir.name


def test_scalars_are_the_registered_metrics(run_dir):
    scalars = read_table(run_dir, "scalars")
    assert scalars["step"].tolist() == [1, 2, 3, 4, 5, 6]
    written = {c for c in scalars.columns if c not in ("step", "time", "wall_s")}
    # every metric written is documented, and every GRPO metric documented is written, every step
    assert written == registered_metrics("grpo", rewards=["correctness"])
    assert scalars[always_filled(written)].notna().all().all()
    # 4 passes per batch: the policy moves within a step, so ratios leave 1
    assert (scalars["ratio/max"] > 1.0).any() and (scalars["ratio/min"] < 1.0).any()


def test_advantages_match_the_formula_in_every_group(run_dir):
    samples = read_table(run_dir, "samples")
    assert len(samples) == 6 * 4 * 4
    groups = samples.groupby(["step", "group"])  # the group key alone: no knowledge of row order
    assert len(groups) == 6 * 4
    for _, g in groups:
        assert sorted(g["sample_idx"]) == [0, 1, 2, 3] and g["prompt_id"].nunique() == 1
        rewards = torch.tensor([g["reward"].tolist()], dtype=torch.float64)
        mean, std = rewards.mean(), rewards.std(unbiased=False)
        expected = [0.0] * 4 if std < 1e-6 else ((rewards[0] - mean) / std).tolist()
        assert g["advantage"].tolist() == pytest.approx(expected, abs=1e-5)
        assert g["advantage"].tolist() == pytest.approx(group_advantages(rewards).advantages[0].tolist(), abs=1e-6)


def test_each_step_draws_distinct_prompts(run_dir):
    samples = read_table(run_dir, "samples")
    per_step = samples.groupby("step").agg(groups=("group", "nunique"), prompts=("prompt_id", "nunique"))
    assert (per_step["groups"] == 4).all() and (per_step["prompts"] == 4).all()


def test_zero_std_fraction_matches_samples(run_dir):
    samples, scalars = read_table(run_dir, "samples"), read_table(run_dir, "scalars")
    stds = samples.groupby(["step", "group"])["reward"].std(ddof=0)
    frac = (stds < 1e-6).groupby("step").mean()
    assert scalars.set_index("step")["groups/frac_zero_std"].tolist() == pytest.approx(frac.tolist())


def test_tables_load_with_duckdb(run_dir):
    tables = run_dir / "tables"
    con = duckdb.connect()
    steps = con.execute(f"SELECT count(*), max(step) FROM read_parquet('{tables}/scalars/*.parquet')").fetchone()
    assert steps == (6, 6)
    per_step = con.execute(f"""SELECT step, avg(reward) AS r FROM read_parquet('{tables}/samples/*.parquet')
                           GROUP BY step ORDER BY step""").fetchall()
    scalars = read_table(run_dir, "scalars")
    assert [r for _, r in per_step] == pytest.approx(scalars["reward/mean"].tolist(), abs=1e-6)
    hist = con.execute(f"SELECT step, counts, tokens, clipped_low, clipped_high FROM "
                   f"read_parquet('{tables}/histograms/*.parquet') ORDER BY step").fetchall()
    assert len(hist) == 6
    for _, counts, tokens, low, high in hist:
        assert len(counts) == 40 and sum(counts) == tokens and low + high <= tokens


def test_clip_counts_agree_between_histograms_and_scalars(run_dir):
    hist = read_table(run_dir, "histograms").set_index("step")
    scalars = read_table(run_dir, "scalars").set_index("step")
    for step in scalars.index:
        h = hist.loc[step]
        assert scalars.loc[step, "clip/low"] == pytest.approx(h["clipped_low"] / h["tokens"])
        assert scalars.loc[step, "clip/high"] == pytest.approx(h["clipped_high"] / h["tokens"])


def test_token_detail_is_consistent(run_dir):
    tokens = read_table(run_dir, "tokens")
    assert set(tokens["step"]) == set(range(1, 7))
    # token_detail_groups = 2: the first two groups of each step, and the two carrying most of its KL
    # (and the two with the largest ratio), which a kl_explosion finding sends the reader to
    samples = read_table(run_dir, "samples")
    samples["kl"] = samples["kl_mean"] * samples["length"]
    for step, rows in samples.groupby("step"):
        kept = set(tokens.loc[tokens["step"] == step, "group"])
        most_kl = set(rows.groupby("group")["kl"].sum().nlargest(2).index)
        assert {0, 1} | most_kl <= kept and len(kept) <= 6
    ratio = (tokens["logp_new"] - tokens["logp_old"]).map(math.exp)
    assert tokens["ratio"].tolist() == pytest.approx(ratio.tolist(), rel=1e-5)
    lr = tokens["logp_ref"] - tokens["logp_new"]
    k3 = lr.map(math.exp) - lr - 1
    assert tokens["kl"].tolist() == pytest.approx(k3.tolist(), abs=1e-5)
    assert (tokens["clipped"] == (tokens["clipped_low"] | tokens["clipped_high"])).all()
    high = tokens[tokens["clipped_high"]]
    assert (high["ratio"] > 1.2).all() and (high["advantage"] > 0).all()
    samples = read_table(run_dir, "samples")
    joined = tokens.groupby(["step", "group", "sample_idx", "prompt_id"]).size().rename("n").reset_index().merge(
        samples, on=["step", "group", "sample_idx", "prompt_id"])
    assert len(joined) == tokens.groupby(["step", "group", "sample_idx"]).ngroups  # each detailed completion has its sample row
    assert (joined["n"] == joined["length"]).all()


def test_checkpoints_are_complete(run_dir):
    ckpts = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert ckpts == ["initial", "step-00000003", "step-00000006"]
    for name in ckpts[1:]:
        assert {p.name for p in (run_dir / "checkpoints" / name).iterdir()} == {
            "model.safetensors", "optimizer.pt", "rng.pt", "meta.json"}


# Same seed, same run (completions, advantages, losses): tests/trainer/test_seed_determinism.py, one pair of runs.


def test_one_pass_means_ratio_exactly_one(one_pass_run):
    scalars = read_table(one_pass_run, "scalars")
    assert (scalars["ratio/min"] == 1.0).all() and (scalars["ratio/max"] == 1.0).all()
    assert (scalars["clip/total"] == 0.0).all()


def test_beta_zero_loads_no_reference(one_pass_run):
    run = one_pass_run
    tokens = read_table(run, "tokens")
    assert tokens["logp_ref"].isna().all() and (tokens["kl"] == 0).all()
    assert "kl/mean" not in read_table(run, "scalars")  # not measured: absent, never a 0
