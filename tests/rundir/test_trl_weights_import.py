"""Reward weights from a real TRL 1.16 output folder: read where the folder
records them (the GRPOConfig pickled in training_args.bin), inferred only where it does not.

The run is too short to infer the weights from (one generation batch: one equation for two
weights), which is what made the import refuse before."""

from __future__ import annotations

import importlib
import json
import pickle
import shutil
import zipfile

import pyarrow.parquet as pq
import pytest

from grpo_lab.rundir.importers import trl_args, weights
from trainer_helpers import read_table
from trl_helpers import G, correct, run_trl

cli = importlib.import_module("grpo_lab.rundir.import")
WEIGHTS = [2.0, 0.5]


def length(prompts, completions, **kwargs):
    """A score every completion gets (no None), so the logged means are exact."""
    return [len(c) / 10 for c in completions]


@pytest.fixture(scope="module")
def trl_out(tmp_path_factory):
    root = tmp_path_factory.mktemp("trl-weights")
    trainer = run_trl(root, "out", reward_funcs=(correct, length), reward_weights=WEIGHTS, max_steps=2,
                      eval_strategy="no", save_strategy="steps", save_steps=2)
    assert trainer.reward_weights.tolist() == WEIGHTS
    return root


def imported(source, runs, name, *args):
    assert cli.main([str(source), "--name", name, "--runs-dir", str(runs), *args]) == 0
    return json.loads((runs / name / "config.json").read_text()), runs / name


def test_trl_writes_its_weights_only_into_the_pickled_config(trl_out):
    out = trl_out / "out"
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    assert "reward_weights" not in json.dumps({k: v for k, v in state.items() if k != "log_history"})
    options = trl_args.read(out / "checkpoint-2" / "training_args.bin")
    assert options["reward_weights"] == WEIGHTS and options["num_generations"] == G
    assert options["scale_rewards"] == "group" and options["eval_strategy"] == "no"  # enums as their values


def test_the_import_reads_the_weights_and_keeps_every_advantage(trl_out, tmp_path):
    source = trl_out / "out"
    # what inference alone can do here: one logged batch, two weights (the import used to refuse)
    history = json.loads((source / "checkpoint-2" / "trainer_state.json").read_text())["log_history"]
    assert len([r for r in history if "reward" in r]) == 1
    config, run = imported(source, tmp_path, "trl-w")
    assert config["rewards"] == {"correct": 2.0, "length": 0.5}
    assert config["reward_weights_from"] == "checkpoint-2/training_args.bin (GRPOConfig reward_weights)"
    assert config["group_size"] == G and config["lr"] == 1e-3 and config["trl/reward_weights"] == WEIGHTS
    samples = read_table(run, "samples")
    logged = pq.read_table(source / "completions" / "completions_00001.parquet").to_pandas()
    assert len(samples) == len(logged) == 2 * G
    assert samples["advantage"].tolist() == pytest.approx(logged["advantage"].tolist(), abs=1e-6)
    assert samples["reward"].tolist() == pytest.approx((2.0 * logged["correct"] + 0.5 * logged["length"]).tolist())
    per_fn = {fn: logged[fn].tolist() for fn in ("correct", "length")}
    assert weights.reproduces_advantages([(per_fn, logged["advantage"].tolist())], config["rewards"], G)
    assert not weights.reproduces_advantages([(per_fn, logged["advantage"].tolist())], {"correct": 1, "length": 1}, G)


def test_without_completions_the_config_still_gives_the_weights_and_the_group_size(trl_out, tmp_path):
    """log_completions=False: no completions file says the functions' order (trainer_state.json's
    keys are sorted); the one order of the recorded weights that reproduces the logged reward is
    taken. num_generations is the recorded one, not 1."""
    source = tmp_path / "no-completions"
    shutil.copytree(trl_out / "out", source)
    shutil.rmtree(source / "completions")
    config, run = imported(source, tmp_path / "runs", "trl-nc")
    assert config["rewards"] == {"correct": 2.0, "length": 0.5}
    assert config["group_size"] == G
    scalars = read_table(run, "scalars").set_index("step")
    history = json.loads((source / "checkpoint-2" / "trainer_state.json").read_text())["log_history"]
    assert scalars.loc[1, "reward/mean"] == pytest.approx(next(r["reward"] for r in history if "reward" in r))


def test_without_a_saved_config_the_group_size_is_not_made_up(trl_out, tmp_path):
    source = tmp_path / "state-only"
    source.mkdir()
    shutil.copy(trl_out / "out" / "checkpoint-2" / "trainer_state.json", source)
    config, _ = imported(source, tmp_path / "runs", "trl-s", "--reward-weights", "correct=2,length=0.5")
    assert config["group_size"] is None and config["rewards"] == {"correct": 2.0, "length": 0.5}


def test_a_pickle_that_would_run_code_is_read_as_data(tmp_path):
    """training_args.bin is input: a pickle naming os.system is never called."""
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (__import__("os").system, (f"touch {marker}",))

    folder = tmp_path / "evil"
    folder.mkdir()
    payload = pickle.dumps({"reward_weights": [1.0], "x": Evil()})
    with zipfile.ZipFile(folder / "training_args.bin", "w") as archive:
        archive.writestr("training_args/data.pkl", payload)
    options = trl_args.read(folder / "training_args.bin")
    assert not marker.exists()
    assert options["reward_weights"] == [1.0] and options["x"] == f"touch {marker}"  # the call's argument, as data
    assert trl_args.reward_weights({"reward_weights": None}, 3, "x") == [1.0, 1.0, 1.0]
    (folder / "training_args.bin").write_bytes(b"\x80\x04not a pickle")
    with pytest.raises(Exception, match=r"expected TRL's training_args.bin"):
        trl_args.read(folder / "training_args.bin")


def test_the_docstring_examples_run():
    import doctest

    for module in (trl_args, weights):
        assert doctest.testmod(module).failed == 0
