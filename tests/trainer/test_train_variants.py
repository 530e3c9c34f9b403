"""GRPO's variants end to end on the built-in tiny model: dynamic sampling keeps only groups with a
spread and stops at its bound; GSPO's ratio, batch std, the constant normaliser, truncated masking
and the entropy bonus run and leave the traces the run-directory doc promises."""

import json
import math

import pytest
import torch

from grpo_lab.objective.functions import group_advantages
from grpo_lab.rundir.status import read_status
from shared_runs import grpo_run  # noqa: F401 (a fixture: pytest finds it by name)
from trainer_helpers import read_table, run_trainer

TINY = ["--prompts-per-step", "4", "--group-size", "4", "--sft-steps", "2", "--flush-seconds", "0"]


def groups_of(samples):
    return samples.groupby(["step", "group"])


@pytest.fixture(scope="module")
def dynamic_run(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    # the bare flag (no "true" after it) before another option: test_the_bare_dynamic_sampling_flag_runs
    done = run_trainer(runs, "ds", *TINY, "--max-steps", "3", "--dynamic-sampling", "--dynamic-sampling-rounds", "2")
    assert done.returncode == 0, done.stderr[-2000:]
    return runs / "ds"


def test_the_bare_dynamic_sampling_flag_runs(dynamic_run):
    """A boolean flag alone, on the real command line, is true and the run finishes (the dashboard's
    `--dynamic-sampling true` form: tests/trainer/test_cli_options.py parses it)."""
    assert json.loads((dynamic_run / "config.json").read_text())["dynamic_sampling"] is True
    assert read_status(dynamic_run / "status.json")["state"] == "finished"


def test_dynamic_sampling_never_keeps_a_group_with_equal_rewards(dynamic_run):
    samples = read_table(dynamic_run, "samples")
    for (step, group), g in groups_of(samples):
        assert g["dropped"].nunique() == 1 and sorted(g["sample_idx"]) == [0, 1, 2, 3]
        spread = g["reward"].std(ddof=0)
        if g["dropped"].iloc[0]:
            assert spread < 1e-6 and (g["advantage"] == 0).all() and g["ratio_mean"].isna().all()
        else:
            assert spread > 1e-6, (step, group)
            assert g["advantage"].tolist() == pytest.approx(
                group_advantages(torch.tensor([g["reward"].tolist()])).advantages[0].tolist(), abs=1e-5)


def test_dynamic_sampling_scalars_describe_what_was_sampled(dynamic_run):
    samples, scalars = read_table(dynamic_run, "samples"), read_table(dynamic_run, "scalars").set_index("step")
    per_step = samples.groupby(["step", "group"])["dropped"].first().groupby("step")
    kept, dropped = per_step.apply(lambda d: (~d).sum()), per_step.apply(lambda d: d.sum())
    assert scalars["groups/kept"].tolist() == kept.tolist()
    assert scalars["groups/dropped"].tolist() == dropped.tolist()
    assert scalars["groups/frac_zero_std"].tolist() == pytest.approx((dropped / (kept + dropped)).tolist())
    assert scalars["reward/mean"].tolist() == pytest.approx(samples.groupby("step")["reward"].mean().tolist())
    for step, row in scalars.iterrows():
        assert row["groups/kept"] <= 4 and 1 <= row["groups/sampling_rounds"] <= 3
        if row["groups/kept"] < 4:  # short of groups with a spread: only because the bound was hit
            assert row["groups/sampling_rounds"] == 3
        # extra rounds draw only the missing prompts, fresh ones while the task has them
        assert row["groups/kept"] + row["groups/dropped"] <= 4 * row["groups/sampling_rounds"]
        assert samples[samples["step"] == step]["prompt_id"].is_unique is False  # G rows per prompt
        assert samples[samples["step"] == step].groupby("group")["prompt_id"].first().is_unique
        # pi_old's entropy is the trained groups' (the dropped ones had no forward pass), token-weighted
        trained = samples[(samples["step"] == step) & ~samples["dropped"]]
        if len(trained):
            entropy = (trained["entropy_mean"] * trained["length"]).sum() / trained["length"].sum()
            assert entropy == pytest.approx(row["entropy/mean"], rel=1e-5)
        else:  # nothing trained: no entropy figure
            assert math.isnan(row.get("entropy/mean", math.nan))


def test_the_groups_page_marks_a_dropped_group(dynamic_run, monkeypatch):
    from app_helpers import open_page, texts

    samples = read_table(dynamic_run, "samples")
    dropped = samples[samples["dropped"]]
    assert not dropped.empty  # the seeded tiny model, near chance, ties often: groups are dropped
    step, group = int(dropped["step"].iloc[0]), int(dropped["group"].iloc[0])
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(dynamic_run.parent))
    at = open_page("groups", dynamic_run.name)
    at.number_input(key="groups_step").set_value(step).run()
    picker = at.selectbox(key=f"groups_pick_{step}")
    assert " · dropped" in picker.format_func(group)
    assert all(" · dropped" not in picker.format_func(g) for g in set(samples[(samples["step"] == step)
                                                                            & ~samples["dropped"]]["group"]))
    picker.set_value(group).run()
    assert "Dynamic sampling dropped this group" in texts(at.info)


def test_dynamic_sampling_stops_at_its_bound_when_no_group_has_a_spread(tmp_path):
    cfg = tmp_path / "flat.yaml"  # every completion is shorter than 100 characters: reward 0 for all
    cfg.write_text("rewards: {length: 1.0}\nreward_params: {length: {max_len: 100}}\n")
    done = run_trainer(tmp_path, "flat", "--config", str(cfg), *TINY, "--max-steps", "2",
                       "--dynamic-sampling", "true", "--dynamic-sampling-rounds", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    scalars = read_table(tmp_path / "flat", "scalars")
    assert scalars["groups/sampling_rounds"].tolist() == [2.0, 2.0]
    assert scalars["groups/kept"].tolist() == [0.0, 0.0] and scalars["groups/frac_zero_std"].tolist() == [1.0, 1.0]
    assert scalars["groups/dropped"].tolist() == [8.0, 8.0]  # 4 prompts, then 4 more: nothing kept
    for name in ("loss/total", "grad/norm", "ratio/max", "entropy/mean"):  # no update: no training figures
        assert name not in scalars or scalars[name].isna().all()
    samples = read_table(tmp_path / "flat", "samples")
    assert len(samples) == 2 * 8 * 4 and samples["dropped"].all()
    assert read_table(tmp_path / "flat", "histograms").empty


def test_every_variant_option_together(tmp_path):
    done = run_trainer(tmp_path, "all", *TINY, "--max-steps", "2", "--passes", "2", "--importance-level", "sequence",
                       "--std-mode", "batch", "--loss-aggregation", "constant", "--entropy-coef", "0.01",
                       "--mask-truncated", "true", "--epsilon", "0.0003", "--epsilon-high", "0.0004")
    assert done.returncode == 0, done.stderr[-2000:]
    scalars = read_table(tmp_path / "all", "scalars")
    assert (scalars["loss/entropy_bonus"] > 0).all()
    assert scalars["groups/kept"].tolist() == [4.0, 4.0] and scalars["groups/sampling_rounds"].tolist() == [1.0, 1.0]
    assert set(read_table(tmp_path / "all", "histograms")["importance_level"]) == {"sequence"}
    # GSPO: every token of a completion carries its response's one ratio
    tokens = read_table(tmp_path / "all", "tokens")
    spread = tokens.groupby(["step", "group", "sample_idx"])["ratio"].agg(lambda r: r.max() - r.min())
    assert (spread < 1e-6).all() and (tokens["ratio"] != 1.0).any()
    clipped = tokens.groupby(["step", "group", "sample_idx"])["clipped"].nunique()
    assert (clipped == 1).all()  # clipped per response: all its tokens or none
    # batch std: each group's mean, the std of the whole step's rewards
    samples = read_table(tmp_path / "all", "samples")
    for _, step_rows in samples.groupby("step"):
        rewards = torch.tensor([g["reward"].tolist() for _, g in step_rows.groupby("group")])
        expected = group_advantages(rewards, "batch").advantages.flatten().tolist()
        logged = [a for _, g in step_rows.groupby("group") for a in g["advantage"]]
        assert logged == pytest.approx(expected, abs=1e-5)


def test_masked_truncated_completions_get_no_gradient(tmp_path):
    # one new token: the built-in model writes a digit, so nearly every completion is cut before EOS
    args = [*TINY, "--max-steps", "3", "--max-new-tokens", "1", "--beta", "0"]
    assert run_trainer(tmp_path, "masked", *args, "--mask-truncated", "true").returncode == 0
    assert run_trainer(tmp_path, "plain", *args).returncode == 0
    masked, plain = (read_table(tmp_path / n, "scalars").set_index("step") for n in ("masked", "plain"))
    samples = read_table(tmp_path / "masked", "samples")
    all_cut = samples.groupby("step")["truncated"].all()
    assert all_cut.any()
    for step in all_cut[all_cut].index:
        assert masked.loc[step, "loss/policy"] == 0.0 and masked.loc[step, "grad/norm"] == 0.0
    assert (plain["grad/norm"] > 0).any()


def test_variant_options_are_grpo_only(tmp_path):
    done = run_trainer(tmp_path, "ppo", "--algo", "ppo", "--dynamic-sampling", "true")
    assert done.returncode == 2
    assert "dynamic_sampling: is a GRPO option" in done.stderr
    done = run_trainer(tmp_path, "neg", "--entropy-coef", "-0.1")
    assert done.returncode == 2 and "entropy_coef: must be >= 0" in done.stderr


def test_defaults_log_the_neutral_values(grpo_run):
    # the shared run sets none of the variant options (shared_runs.GRPO_FLAGS): every step neutral
    scalars = read_table(grpo_run, "scalars")
    assert len(scalars) == 6
    for _, row in scalars.iterrows():
        assert (row["groups/kept"], row["groups/dropped"], row["groups/sampling_rounds"]) == (4.0, 0.0, 1.0)
        assert row["loss/entropy_bonus"] == 0.0 and not math.isnan(row["loss/total"])
    assert not read_table(grpo_run, "samples")["dropped"].any()
    assert set(read_table(grpo_run, "histograms")["importance_level"]) == {"token"}
