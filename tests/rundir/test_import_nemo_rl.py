"""grpo-lab-import of a NeMo-RL GRPO log folder (train_data_step<N>.jsonl). The files are written here as
NeMo-RL's Logger.log_batched_dict_as_jsonl writes them (each sample's fields, lists for the per-token ones,
and `idx`; nemo_rl/utils/logger.py): NeMo-RL itself needs Ray and a GPU worker, and is not installed here."""

from __future__ import annotations

import importlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from grpo_lab.objective import mismatch
from trainer_helpers import read_table

cli = importlib.import_module("grpo_lab.rundir.import")

PROMPTS = ["What is 2+2?", "Solve x+10=15"]
N = 3  # num_generations_per_prompt: each prompt's samples one after another (repeat_interleave)


def sample(prompt: str, answer: str, reward: float, adv: float, rng: np.random.Generator) -> dict:
    """One sample as NeMo-RL logs it: 4 prompt tokens, 3 response tokens, 1 of padding."""
    mask = [0, 0, 0, 0, 1, 1, 1, 0]
    prev = rng.normal(-1.0, 0.3, 8).round(4).tolist()
    gen = [p + d for p, d in zip(prev, rng.normal(0, 0.05, 8).round(4))]
    return {"content": [prompt, answer], "rewards": reward, "input_lengths": 7, "token_ids": list(range(8)),
            "token_loss_mask": mask, "sample_loss_mask": 1.0, "advantages": [adv * m for m in mask],
            "generation_logprobs": gen, "prev_logprobs": prev}


def write_step(folder: Path, step: int, rows: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"train_data_step{step}.jsonl", "w") as f:
        for i, row in enumerate(rows):
            f.write(json.dumps({**row, "idx": i}, default=str) + "\n")


@pytest.fixture
def logs(tmp_path):
    rng = np.random.default_rng(0)
    steps = {}
    for step in (1, 2):
        rewards = [[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]] if step == 1 else [[0.0, 1.0, 1.0], [0.0, 0.0, 1.0]]
        rows = [sample(p, f"answer {step}.{g}.{k}", r, 0.1 * (k + 1) * (-1) ** g, rng)
                for g, (p, rs) in enumerate(zip(PROMPTS, rewards)) for k, r in enumerate(rs)]
        write_step(tmp_path / "logs", step, rows)
        steps[step] = rows
    return tmp_path / "logs", steps


def test_prompt_completion_reward_advantage_and_groups_come_in(logs, tmp_path):
    source, steps = logs
    assert cli.main([str(source), "--name", "nemo", "--runs-dir", str(tmp_path / "runs")]) == 0
    run = tmp_path / "runs" / "nemo"
    got = read_table(run, "samples")
    assert len(got) == 12 and sorted(got["step"].unique()) == [1, 2]
    for step, rows in steps.items():
        s = got[got["step"] == step]
        assert s["prompt"].tolist() == [r["content"][0] for r in rows]
        assert s["completion"].tolist() == [r["content"][-1] for r in rows]
        assert s["reward"].tolist() == [r["rewards"] for r in rows]
        assert np.allclose(s["advantage"], [r["advantages"][4] for r in rows])  # NeMo-RL's own
        assert s["group"].tolist() == [0, 0, 0, 1, 1, 1] and s["sample_idx"].tolist() == [0, 1, 2] * 2
    config = json.loads((run / "config.json").read_text())
    assert config["source"] == "nemo-rl" and config["group_size"] == N and config["prompts_per_step"] == 2


def test_the_sampler_and_trainer_log_probs_give_the_mismatch_figures(logs, tmp_path):
    source, steps = logs
    assert cli.main([str(source), "--name", "nemo", "--runs-dir", str(tmp_path / "runs"), "--format", "nemo-rl"]) == 0
    run = tmp_path / "runs" / "nemo"
    scalars = read_table(run, "scalars").set_index("step")
    rows = steps[1]
    delta = np.array([[p - g for p, g, m in zip(r["prev_logprobs"], r["generation_logprobs"], r["token_loss_mask"])
                       if m] for r in rows])
    w = np.exp(delta)
    # objective/mismatch.py works in float32, as in the trainer: w - 1 - log w of small gaps keeps 4 digits
    assert math.isclose(scalars.loc[1, "mismatch/kl"], float((w - 1 - delta).mean()), rel_tol=1e-4)
    assert math.isclose(scalars.loc[1, "mismatch/logp_diff_max"], float(np.abs(delta).max()), rel_tol=1e-5)
    assert scalars.loc[1, "groups/frac_zero_std"] == 0.5  # the second prompt's rewards are all 1
    assert scalars.loc[1, "reward/mean"] == pytest.approx(4 / 6)
    per = read_table(run, "samples").query("step == 1")["mismatch_mean"].to_numpy()
    assert np.allclose(per, np.abs(delta).mean(axis=1), rtol=1e-5)
    assert set(mismatch.NAMES) <= {c.removeprefix("mismatch/") for c in scalars.columns}


def test_a_line_without_content_is_one_line_naming_it(logs, tmp_path, capsys):
    source, _ = logs
    (source / "train_data_step3.jsonl").write_text('{"rewards": 1.0, "idx": 0}\n')
    assert cli.main([str(source), "--name", "bad", "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "train_data_step3.jsonl:1: expected a JSON object with content" in err
    assert not (tmp_path / "runs" / "bad").exists()
