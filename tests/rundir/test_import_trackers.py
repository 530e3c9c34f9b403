"""grpo-lab-import of trackers' logs other trainers wrote: verl's and OpenRLHF's TensorBoard event files (written
here as both write them: torch.utils.tensorboard's SummaryWriter, add_scalar(name, value, step); neither trainer
runs on a CPU without Ray and a GPU worker). Mapped names land under ours: verl's rollout_corr/k3_kl is
mismatch/kl, drawn in Live's "Sampler vs trainer" section. Needs requirements-trackers.txt (TensorBoard)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest

from grpo_lab.rundir import metrics
from grpo_lab.rundir.importers import tracker_names
from trainer_helpers import read_table

cli = importlib.import_module("grpo_lab.rundir.import")


def event_files(folder: Path, steps: dict[int, dict[str, float]]) -> Path:
    if importlib.util.find_spec("tensorboard") is None:
        pytest.fail("tensorboard not installed: pip install -r requirements-trackers.txt")
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(folder))
    for step, values in steps.items():
        for name, value in values.items():
            writer.add_scalar(name, value, step)
    writer.close()
    return folder


VERL = {1: {"critic/score/mean": 0.25, "actor/pg_loss": -0.01, "rollout_corr/k3_kl": 0.002,
            "rollout_corr/kl": 0.0015, "rollout_corr/rollout_is_mean": 0.98,
            "rollout_corr/rollout_rs_masked_fraction": 0.01, "actor/ppo_kl": 1e-4},
        2: {"critic/score/mean": 0.5, "actor/pg_loss": -0.02, "rollout_corr/k3_kl": 0.004,
            "rollout_corr/kl": 0.003, "rollout_corr/rollout_is_mean": 0.97,
            "rollout_corr/rollout_rs_masked_fraction": 0.02, "actor/ppo_kl": 2e-4}}


def test_verls_mismatch_figures_land_in_the_sampler_section(tmp_path):
    # verl's default folder: tensorboard_log/<project>/<experiment> (TENSORBOARD_DIR)
    source = event_files(tmp_path / "tensorboard_log" / "p" / "e", VERL)
    assert cli.main([str(source), "--name", "verl-tb", "--runs-dir", str(tmp_path / "runs")]) == 0
    run = tmp_path / "runs" / "verl-tb"
    scalars = read_table(run, "scalars").set_index("step")
    assert list(scalars.index) == [1, 2]
    for step, values in VERL.items():
        for name, value in values.items():
            assert scalars.loc[step, tracker_names.ours(name, "verl")] == np.float32(value), name
    assert {"mismatch/kl", "mismatch/weight_mean", "mismatch/masked_frac", "reward/mean", "loss/policy",
            "rollout_corr/kl", "actor/ppo_kl"} <= set(scalars.columns)
    assert "rollout_corr/k3_kl" not in scalars.columns  # under our name only
    sampler = [p.id for p in metrics.PANELS if p.section == "sampler" and set(p.names) & set(scalars.columns)]
    assert "mismatch" in sampler  # the panel with mismatch/kl: Live draws it
    config = json.loads((run / "config.json").read_text())
    assert config["source"] == "verl-tensorboard" and config["max_steps"] == 2


def test_openrlhf_scalars_come_in_under_our_names(tmp_path):
    steps = {s: {"train/reward": 0.1 * s, "train/kl": 0.01 * s, "train/policy_loss": -0.5, "train/return": 2.0}
             for s in (1, 2, 3)}
    source = event_files(tmp_path / "tb", steps)
    assert cli.main([str(source), "--name", "orlhf", "--runs-dir", str(tmp_path / "runs"), "--format",
                     "tensorboard"]) == 0
    scalars = read_table(tmp_path / "runs" / "orlhf", "scalars").set_index("step")
    assert np.allclose(scalars["reward/mean"], [0.1, 0.2, 0.3]) and np.allclose(scalars["kl/mean"], [0.01, 0.02, 0.03])
    assert "train/return" in scalars.columns and "train/reward" not in scalars.columns


def test_a_folder_without_scalars_is_one_line_and_leaves_nothing(tmp_path, capsys):
    source = event_files(tmp_path / "empty", {})
    assert cli.main([str(source), "--name", "x", "--runs-dir", str(tmp_path / "runs"), "--format", "tensorboard"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "expected tensorboard scalars" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "runs" / "x").exists()


def test_trackio_needs_the_run_named(tmp_path, capsys):
    (tmp_path / "store").mkdir()
    assert cli.main([str(tmp_path / "store"), "--name", "x", "--runs-dir", str(tmp_path), "--format", "trackio"]) == 2
    assert "--run None: trackio needs PROJECT/RUN" in capsys.readouterr().err


def test_every_mapped_name_is_registered_and_in_the_docs():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "trl-and-verl.md").read_text()
    for framework, table in tracker_names.FRAMEWORKS.items():
        for theirs, ours in table.items():
            assert metrics.registered_name(ours) is not None, ours
            assert f"| `{theirs}` | `{ours}` |" in doc, f"{framework}: {theirs}"


def test_a_verl_dump_with_its_tensorboard_folder_is_one_run_with_the_mismatch_figures(tmp_path):
    dump = tmp_path / "rollouts"
    dump.mkdir()
    for step in (1, 2):
        rows = [{"input": "2+2=", "output": out, "score": score, "step": step, "uid": "a"}
                for out, score in (("4", 1.0), ("5", 0.0))]
        (dump / f"{step}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    board = event_files(tmp_path / "tensorboard_log" / "p" / "e", VERL)
    assert cli.main([str(dump), "--name", "verl", "--runs-dir", str(tmp_path / "runs"),
                     "--tensorboard", str(board)]) == 0
    run = tmp_path / "runs" / "verl"
    scalars = read_table(run, "scalars").set_index("step")
    assert scalars.loc[2, "mismatch/kl"] == np.float32(0.004) and scalars.loc[1, "loss/policy"] == np.float32(-0.01)
    assert scalars["reward/mean"].tolist() == [0.5, 0.5]  # the dump's own (critic/score/mean said 0.25, 0.5)
    assert read_table(run, "samples")["completion"].tolist() == ["4", "5", "4", "5"]


def test_tensorboard_joins_only_a_verl_dump(tmp_path, capsys):
    board = event_files(tmp_path / "tb", VERL)
    assert cli.main([str(board), "--name", "x", "--runs-dir", str(tmp_path / "runs"),
                     "--tensorboard", str(board)]) == 2
    assert "--tensorboard" in capsys.readouterr().err and not (tmp_path / "runs" / "x").exists()
