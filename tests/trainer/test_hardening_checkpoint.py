"""A checkpoint is input: a planted pickle in rng.pt or optimizer.pt is refused, unrun, by every resume
(grpo-lab-train --resume, the dashboard's process_control.resume, grpo-lab-sweep --resume); a checkpoint the
trainer wrote, of this format or the one before, resumes exactly (grpo_lab/trainer/checkpoint.py)."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from grpo_lab.launching import launch_records, process_control
from grpo_lab.launching.keys import KEY_DIR_ENV
from grpo_lab.trainer import checkpoint
from grpo_lab.trainer.config import ConfigError
from trainer_helpers import ROOT, run_trainer, wait_until

SWEEP = "h"
RUN = "h-base-s0"


class Payload:
    """What an attacker plants: unpickling it would call os.system and create the marker file."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def plant(run: Path, file: str, marker: Path) -> Path:
    """The payload in place of `file` of the run's latest checkpoint; that file's path."""
    target = checkpoint.latest(run / "checkpoints") / file
    torch.save({"state": Payload(marker), "param_groups": []}, target)
    return target


def tiny_model_and_optimizer():
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    return model, optimizer


def draws() -> tuple:
    """One draw of each generator a run uses, including the cached Gaussians python and numpy keep."""
    return (random.random(), random.gauss(0, 1), np.random.rand(), np.random.standard_normal(), torch.rand(2).tolist())


def test_rng_state_round_trips_bit_for_bit_and_holds_only_tensors_and_numbers(tmp_path):
    model, optimizer = tiny_model_and_optimizer()
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    random.gauss(0, 1), np.random.standard_normal()  # a cached second Gaussian in both
    saved = checkpoint.save(tmp_path, 5, {"model": model}, optimizer)
    expected = draws()
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    assert torch.load(saved / "rng.pt", weights_only=True)["format"] == checkpoint.RNG_FORMAT  # no allowlist needed
    assert checkpoint.load(saved, {"model": model}, optimizer) == 5
    assert draws() == expected


def test_an_rng_pt_of_the_previous_format_still_resumes(tmp_path):
    """grpo-lab before RNG_FORMAT pickled python's tuple and numpy's ndarray; those load (numpy's array
    rebuilders allowed for that file alone) and continue the same draws."""
    model, optimizer = tiny_model_and_optimizer()
    saved = checkpoint.save(tmp_path, 5, {"model": model}, optimizer)
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    torch.save({"torch": torch.get_rng_state(), "cuda": [], "python": random.getstate(),
                "numpy": np.random.get_state()}, saved / "rng.pt")
    expected = draws()
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    checkpoint.check(saved)
    checkpoint.load(saved, {"model": model}, optimizer)
    assert draws() == expected


@pytest.mark.parametrize("file", ["rng.pt", "optimizer.pt"])
def test_a_planted_pickle_is_refused_by_check_and_load_and_never_runs(tmp_path, file):
    model, optimizer = tiny_model_and_optimizer()
    checkpoint.save(tmp_path / "checkpoints", 5, {"model": model}, optimizer)
    marker = tmp_path / "ran"
    target = plant(tmp_path, file, marker)
    for attempt in (lambda: checkpoint.check(target.parent),
                    lambda: checkpoint.load(target.parent, {"model": model}, optimizer)):
        with pytest.raises(ConfigError) as err:
            attempt()
        message = str(err.value)
        assert message.startswith(f"resume: {target} cannot be loaded as data (it names posix.system")
        assert "\n" not in message
    assert not marker.exists()


@pytest.mark.parametrize("state, why", [
    ({"format": 2, "torch": torch.zeros(3, dtype=torch.uint8), "cuda": [], "python": {}, "numpy": {}},
     "python or numpy state is not a tensor"),
    ({"torch": torch.zeros(3, dtype=torch.uint8), "cuda": [], "python": (3, (1, 2), None),
      "numpy": ("MT19937", np.zeros(624, dtype=np.uint32), 0, 0, 0.0)}, "a generator refuses its state"),
    ([1, 2, 3], "not the RNG states a checkpoint holds"),
])
def test_an_rng_state_of_the_wrong_shape_is_refused_before_any_generator_takes_it(tmp_path, state, why):
    model, optimizer = tiny_model_and_optimizer()
    saved = checkpoint.save(tmp_path, 5, {"model": model}, optimizer)
    torch.save(state, saved / "rng.pt")
    before = torch.get_rng_state()
    with pytest.raises(ConfigError, match=f"^resume: {saved / 'rng.pt'} is not a checkpoint's RNG state \\({why}"):
        checkpoint.load(saved, {"model": model}, optimizer)
    assert torch.equal(torch.get_rng_state(), before)


# --- the three resume paths, on a real sweep's run --------------------------------------------------


def env(root: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), KEY_DIR_ENV: str(root / "keys")}


def sweep_argv(runs: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "grpo_lab.launching.sweep", "--name", SWEEP, "--seeds", "1", "--runs-dir", str(runs),
            "--wait", "--poll", "0.5", "--max-steps", "4", "--checkpoint-every", "2", "--prompts-per-step", "4",
            "--group-size", "4", "--sft-steps", "5", "--flush-seconds", "0", *extra]


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> Path:
    """A finished one-run sweep (4 steps, checkpoints at 2 and 4), its runs folder. Read only: copy it."""
    root = tmp_path_factory.mktemp("swept")
    result = subprocess.run(sweep_argv(root / "runs"), cwd=ROOT, env=env(root), capture_output=True, text=True,
                            timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "runs"


def stopped_copy(swept: Path, tmp_path: Path, at: int | None = None) -> Path:
    """A copy of the sweep's runs folder whose run reads 'stopped' (at step `at`: later checkpoints removed)."""
    runs = tmp_path / "runs"
    shutil.copytree(swept, runs, ignore=shutil.ignore_patterns(".lock"))
    status_file = runs / RUN / "status.json"
    status = json.loads(status_file.read_text())
    if at is not None:
        for later in checkpoint.periodic(runs / RUN / "checkpoints"):
            if int(later.name.split("-")[1]) > at:
                shutil.rmtree(later)
        status["step"] = at
    status_file.write_text(json.dumps({**status, "state": "stopped"}))
    return runs


def resume_with_train(runs: Path, root: Path) -> str:
    result = run_trainer(runs, RUN, "--resume", timeout=300)
    assert result.returncode == 2, result.stderr[-3000:]
    return result.stderr.strip()


def resume_with_launcher(runs: Path, root: Path) -> str:
    os.environ[KEY_DIR_ENV] = str(root / "keys")  # as the dashboard's process has it
    try:
        pid = process_control.resume(runs, RUN)
        wait_until(lambda: not process_control.is_trainer_of(pid, RUN, runs), timeout=300, what="the trainer to exit")
    finally:
        del os.environ[KEY_DIR_ENV]
    return [line for line in launch_records.launch_log(runs, RUN).splitlines() if line.startswith("error:")][-1]


def resume_with_sweep(runs: Path, root: Path) -> str:
    result = subprocess.run(sweep_argv(runs, "--resume"), cwd=ROOT, env=env(root), capture_output=True, text=True,
                            timeout=400)
    assert result.returncode == 1 and f"{RUN} (stopped)" in result.stderr, result.stderr[-3000:]
    return [line for line in (runs / launch_records.LAUNCH_DIR / f"{RUN}.log").read_text().splitlines()
            if line.startswith("error:")][-1]


@pytest.mark.parametrize("file", ["rng.pt", "optimizer.pt"])
@pytest.mark.parametrize("resume", [resume_with_train, resume_with_launcher, resume_with_sweep])
def test_every_resume_path_refuses_a_planted_pickle_in_one_line_and_runs_none_of_it(swept, tmp_path, resume, file):
    runs = stopped_copy(swept, tmp_path)
    marker = tmp_path / "ran"
    target = plant(runs / RUN, file, marker)
    status_before = (runs / RUN / "status.json").read_text()
    line = resume(runs, tmp_path)
    assert line.startswith(f"error: resume: {target} cannot be loaded as data (it names posix.system"), line
    assert not marker.exists()
    assert (runs / RUN / "status.json").read_text() == status_before  # refused before the run was touched


def test_a_resume_from_a_checkpoint_continues_bit_for_bit(swept, tmp_path):
    """Stopped after step 2 (its step-4 checkpoint removed), resumed: step 4's weights equal the
    uninterrupted run's exactly."""
    runs = stopped_copy(swept, tmp_path, at=2)
    result = run_trainer(runs, RUN, "--resume", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    name = "step-00000004/model.safetensors"
    resumed, straight = (load_file(str(r / RUN / "checkpoints" / name)) for r in (runs, swept))
    assert resumed.keys() == straight.keys()
    assert all(torch.equal(resumed[k], straight[k]) for k in straight)
