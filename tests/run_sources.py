"""Runs as other trainers leave them, for the importers' tests and the pages that show imported runs: a verl
rollout dump, a TRL output folder, and a verl dump already imported."""

from __future__ import annotations

import importlib
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trl_helpers import G

cli = importlib.import_module("grpo_lab.rundir.import")  # a keyword in its name: `python -m grpo_lab.rundir.import`
VERL_PROMPTS = ["user: What is 2+2?\nassistant:", "user: What is 3+5?\nassistant:", "user: What is 7-1?\nassistant:"]


def write_verl_dump(folder: Path, steps: int = 2) -> None:
    """What verl's trainer writes with trainer.rollout_data_dir: <step>.jsonl, one object per completion
    with input, output, score, step (plus gts and the reward function's extra values), in batch order."""
    folder.mkdir(parents=True)
    rng = random.Random(0)
    for step in range(1, steps + 1):
        rows = []
        for p, prompt in enumerate(VERL_PROMPTS):
            for k in range(G):
                score = 1.0 if p == 2 else float(rng.random() < 0.5)  # the third group: all equal, no signal
                if (p, k) == (0, 3):
                    score = None  # not scored
                rows.append({"input": prompt, "output": f"{rng.randint(0, 12)}", "gts": "4", "score": score,
                             "step": step, "acc": score == 1.0})
        rng.shuffle(rows)  # verl's batch order interleaves the groups (balance_batch)
        (folder / f"{step}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def imported_verl_run(root: Path) -> Path:
    """A verl rollout dump (write_verl_dump) imported as `root/runs/verl`: a run without a trainer;
    its runs folder."""
    write_verl_dump(root / "dump")
    assert cli.main([str(root / "dump"), "--name", "verl", "--runs-dir", str(root / "runs")]) == 0
    return root / "runs"


@pytest.fixture(scope="module")
def verl_run(tmp_path_factory):
    """A verl rollout dump imported (std_mode sample, as verl's GRPO): a run made by another trainer."""
    root = tmp_path_factory.mktemp("rescore-verl")
    return imported_verl_run(root) / "verl"


def trl_folder(root: Path, **columns) -> Path:
    """A TRL output folder: one completions file and a trainer_state.json with one function, weight 1."""
    folder = root / "completions"
    folder.mkdir(parents=True)
    table = {"step": [1, 1], "prompt": ["q", "q"], "completion": ["a", "b"], "correct": [1.0, 0.0],
             "advantage": [0.7, -0.7], **columns}
    pq.write_table(pa.table(table), folder / "completions_00001.parquet")
    state = {"log_history": [{"step": 1, "reward": 0.5, "rewards/correct/mean": 0.5}], "max_steps": 1}
    (root / "trainer_state.json").write_text(json.dumps(state))
    return root
