"""Resume after SIGKILL, stop on SIGTERM, and a crash recorded as failed."""

import signal

import pytest

from grpo_lab.rundir.status import read_status
from trainer_helpers import SMALL, read_table, run_trainer, start_trainer, wait_for_step


def test_resume_after_sigkill_continues_without_gaps_or_duplicates(tmp_path):
    args = [*SMALL, "--checkpoint-every", "4", "--seed", "3"]
    # The killed run could not finish before the kill (100,000 steps); the resume sets the end.
    # Killed at step 6 or a little later: the rows of steps 5-6 outlive the step-4 checkpoint and must not repeat.
    proc = start_trainer(tmp_path, "killed", *args, "--max-steps", "100000")
    wait_for_step(tmp_path / "killed", 6, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    status = read_status(tmp_path / "killed" / "status.json")
    assert status["state"] == "failed" and "killed" in status["error"]  # the reader notices
    # a slow kill may land past step 12's checkpoint: resume to 2 steps beyond the last one saved
    saved = max(int(p.name.removeprefix("step-")) for p in (tmp_path / "killed" / "checkpoints").glob("step-*")
                if (p / "meta.json").is_file())
    end = max(12, saved + 2)

    result = run_trainer(tmp_path, "killed", "--resume", "--max-steps", str(end))
    assert result.returncode == 0, result.stderr
    assert read_status(tmp_path / "killed" / "status.json")["state"] == "finished"
    scalars = read_table(tmp_path / "killed", "scalars")
    assert scalars["step"].tolist() == list(range(1, end + 1))
    samples = read_table(tmp_path / "killed", "samples")
    assert samples.groupby("step").size().tolist() == [16] * end

    # The checkpoint restores RNG state too: the resumed run is the uninterrupted run.
    assert run_trainer(tmp_path, "straight", *args, "--max-steps", str(end)).returncode == 0
    straight = read_table(tmp_path / "straight", "samples")
    assert samples["completion"].tolist() == straight["completion"].tolist()
    assert samples["advantage"].tolist() == pytest.approx(straight["advantage"].tolist(), abs=1e-6)


def test_sigterm_flushes_checkpoints_and_stops(tmp_path):
    proc = start_trainer(tmp_path, "term", *SMALL, "--max-steps", "500", "--flush-seconds", "30")
    wait_for_step(tmp_path / "term", 3, proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    status = read_status(tmp_path / "term" / "status.json")
    assert status["state"] == "stopped"
    step = status["step"]
    assert read_table(tmp_path / "term", "scalars")["step"].tolist() == list(range(1, step + 1))
    assert (tmp_path / "term" / "checkpoints" / f"step-{step:08d}" / "meta.json").is_file()

    result = run_trainer(tmp_path, "term", "--resume", "--max-steps", str(step + 2))
    assert result.returncode == 0, result.stderr
    assert read_table(tmp_path / "term", "scalars")["step"].tolist() == list(range(1, step + 3))


def test_exception_marks_run_failed_with_error_and_keeps_rows(tmp_path, monkeypatch):
    from grpo_lab.trainer import grpo as trainer_grpo
    from grpo_lab.trainer.config import from_dict
    from grpo_lab.trainer.run import train

    real_step = trainer_grpo.grpo_step

    def flaky(c, step):
        if step == 3:
            raise RuntimeError("boom at step 3")
        return real_step(c, step)

    monkeypatch.setattr(trainer_grpo, "grpo_step", flaky)
    cfg = from_dict({"runs_dir": str(tmp_path), "name": "crash", "max_steps": 5, "prompts_per_step": 4,
                     "group_size": 4, "sft_steps": 2, "flush_seconds": 60})
    assert train(cfg) == 1
    status = read_status(tmp_path / "crash" / "status.json")
    assert status["state"] == "failed" and status["error"] == "RuntimeError: boom at step 3"
    assert status["step"] == 2
    assert read_table(tmp_path / "crash", "scalars")["step"].tolist() == [1, 2]
    assert "boom at step 3" in (tmp_path / "crash" / "train.log").read_text()
