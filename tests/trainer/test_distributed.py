"""Several processes: real `torchrun --nproc-per-node 2` runs on gloo (one thread each).

The algorithm must not change with the world size: one update on 2 ranks leaves the weights one
rank leaves; a 2-rank run draws the 1-rank run's prompts, numbers its groups across ranks and logs
every completion once, from rank 0. A stop signal stops every rank; a rank that raises fails the
run with its rank and error, and nothing waits forever.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from grpo_lab import rewards
from grpo_lab.rundir import honesty
from grpo_lab.rundir.status import read_status
from grpo_lab.trainer import tiny
from grpo_lab.trainer.step_records import merge_batches, merge_last
from grpo_lab.objective.functions import group_advantages
from grpo_lab.trainer.updates import LastPass
from grpo_lab.trainer.rollout import Rollout
from grpo_lab.trainer.batch import Batch
from shared_runs import copy_run, two_process_runs  # noqa: F401  (a fixture)
from trainer_helpers import (ROOT, always_filled, free_port, registered_metrics, read_table, run_trainer, torchrun,
                             wait_for_step, wait_until)

pytestmark = pytest.mark.timeout(240)

TINY = ["--prompts-per-step", "4", "--group-size", "4", "--sft-steps", "5", "--flush-seconds", "0"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
WORKER = str(ROOT / "tests" / "distributed_worker.py")


def run(cmd: list[str], timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout)


def trainer_args(runs: Path, name: str, *args: str) -> list[str]:
    return ["-m", "grpo_lab.trainer", "--runs-dir", str(runs), "--name", name, *args]


def accelerate(*args: str, nproc: int = 2) -> list[str]:
    """README's `accelerate launch --multi_gpu --num_processes N`: on a machine without N GPUs
    --multi_gpu is what makes it start N processes (here on the CPU, gloo)."""
    exe = Path(sys.executable).with_name("accelerate")
    base = [str(exe), "launch"] if exe.exists() else [sys.executable, "-m", "accelerate.commands.launch"]
    return [*base, "--multi_gpu", "--num_processes", str(nproc), "--num_machines", "1", "--mixed_precision", "no",
            "--dynamo_backend", "no", "--num_cpu_threads_per_process", "1", "--main_process_port", str(free_port()),
            *args]


def rank_process(launcher: subprocess.Popen, rank: int) -> psutil.Process:
    """The launcher's worker process of global rank `rank` (its RANK environment variable)."""
    def find() -> psutil.Process | None:
        for child in psutil.Process(launcher.pid).children():
            try:
                if child.environ().get("RANK") == str(rank):
                    return child
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return None
    return wait_until(find, 30, f"the process of rank {rank}", alive=launcher)


def end(launcher: subprocess.Popen) -> None:
    """A launcher a failed test left running, and its workers: ended, not left to the next test."""
    if launcher.poll() is not None:
        return
    workers = psutil.Process(launcher.pid).children(recursive=True)
    launcher.kill()
    for worker in workers:
        try:
            worker.kill()
        except psutil.NoSuchProcess:
            pass
    launcher.wait(timeout=30)


def assert_every_step_once(run_dir: Path, steps: int) -> None:
    """Steps 1..steps each logged once: one scalars row, and every completion once (4 groups of 4)."""
    assert read_table(run_dir, "scalars")["step"].tolist() == list(range(1, steps + 1))
    samples = read_table(run_dir, "samples")
    assert len(samples) == steps * 4 * 4  # steps x prompts_per_step x G
    assert sorted(samples["step"].unique()) == list(range(1, steps + 1))
    for (step, group), rows in samples.groupby(["step", "group"]):
        assert sorted(rows["sample_idx"]) == [0, 1, 2, 3], (step, group)
    assert (samples.groupby("step")["group"].nunique() == 4).all()


# --- the same update -------------------------------------------------------------------------


def test_one_update_on_two_ranks_leaves_the_one_rank_weights(tmp_path):
    single = run([sys.executable, WORKER, "update", str(tmp_path)])
    assert single.returncode == 0, single.stderr[-3000:]
    double = run(torchrun(WORKER, "update", str(tmp_path)))
    assert double.returncode == 0, double.stderr[-3000:]
    initial = tiny.build_model(tiny.build_tokenizer(), seed=0).state_dict()
    for aggregation in ("sequence", "token", "constant"):  # sequence with truncated responses masked
        one = torch.load(tmp_path / f"single-{aggregation}.pt")
        for strategy in ("ddp", "fsdp"):
            two = torch.load(tmp_path / f"{strategy}-{aggregation}.pt")
            assert two["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-5)  # the global norm, clipped
            assert set(two["weights"]) == set(one["weights"])
            for name, weight in one["weights"].items():
                assert torch.allclose(two["weights"][name], weight, atol=1e-5, rtol=0), (strategy, aggregation, name)
        assert max((one["weights"][k] - initial[k]).abs().max() for k in one["weights"]) > 1e-4  # it moved


def test_rank_0_merges_ranks_of_different_widths():
    """Each rank pads its completions to its own longest; rank 0's merge pads to the longest of all,
    and a figure averaged over real tokens (entropy) must not see the padding."""
    def batch(width: int, prompt_id: str) -> Batch:
        mask = torch.ones(2, width)
        rollout = Rollout(input_ids=torch.ones(2, 3 + width, dtype=torch.long),
                          attention_mask=torch.ones(2, 3 + width, dtype=torch.long), prompt_len=3,
                          completion_mask=mask.long(), truncated=torch.tensor([False, True]), completions=["a", "b"],
                          generation_s=width / 10)
        return Batch(rows=[{"prompt_id": prompt_id, "prompt": "1+1="}], group_size=2, rollout=rollout, mask=mask,
                     scores=rewards.Scores(total=[1.0, 0.0], per_reward={"correctness": [1.0, 0.0]}),
                     totals=torch.tensor([1.0, 0.0]), old_logp=torch.zeros(2, width),
                     entropy=torch.full((2, width), 0.5), ref_logp=None)

    merged = merge_batches([batch(2, "rank0"), batch(5, "rank1")])
    assert merged.mask.shape == (4, 5) and merged.mask.sum() == 2 * 2 + 2 * 5
    assert [r["prompt_id"] for r in merged.rows] == ["rank0", "rank1"]  # global group 1 is rank 1's group 0
    assert float((merged.entropy * merged.mask).sum() / merged.mask.sum()) == pytest.approx(0.5)
    assert merged.rollout.generation_s == pytest.approx(0.5)  # the slower rank
    last = merge_last([LastPass.like(torch.zeros(2, 2)), LastPass.like(torch.zeros(2, 5))])
    assert last.ratio.shape == (4, 5) and last.clipped_low.dtype == torch.bool


# --- a short run -------------------------------------------------------------------------------


@pytest.fixture
def runs(two_process_runs):
    """The same seed and global batch: 2 steps on 2 ranks ("two"), and on one process ("one"); shared with
    tests/trainer/test_rank_timings.py (its rank 1 samples a second late, which changes no figure read here)."""
    return two_process_runs


def test_status_names_the_world(runs):
    status = read_status(runs / "two" / "status.json")
    assert status["state"] == "finished" and status["step"] == 2
    assert status["world_size"] == 2 and status["strategy"] == "ddp" and status["devices"] == ["cpu", "cpu"]
    one = read_status(runs / "one" / "status.json")
    assert one["world_size"] == 1 and one["strategy"] is None and one["devices"] == ["cpu"]
    assert json.loads((runs / "two" / "config.json").read_text())["strategy"] == "ddp"


def test_every_completion_once_with_global_groups(runs):
    samples = read_table(runs / "two", "samples")
    assert len(samples) == 2 * 4 * 4  # steps x prompts_per_step x G
    for step, rows in samples.groupby("step"):
        assert sorted(rows["group"].unique()) == [0, 1, 2, 3]  # rank 1's local groups 0, 1 are 2, 3
    for _, g in samples.groupby(["step", "group"]):
        assert sorted(g["sample_idx"]) == [0, 1, 2, 3] and g["prompt_id"].nunique() == 1
        rewards = torch.tensor([g["reward"].tolist()], dtype=torch.float64)
        assert g["advantage"].tolist() == pytest.approx(group_advantages(rewards).advantages[0].tolist(), abs=1e-6)


def test_same_prompts_as_one_process(runs):
    def prompts(name):
        s = read_table(runs / name, "samples")
        return s.groupby(["step", "group"])["prompt_id"].first().to_dict()

    assert prompts("two") == prompts("one")


def test_scalars_are_global(runs):
    scalars = read_table(runs / "two", "scalars").set_index("step")
    samples = read_table(runs / "two", "samples")
    written = {c for c in scalars.columns if c not in ("time", "wall_s")}
    assert written == registered_metrics("grpo", rewards=["correctness"], processes=2)
    assert scalars[always_filled(written)].notna().all().all()
    for step, rows in samples.groupby("step"):
        assert scalars.loc[step, "reward/mean"] == pytest.approx(rows["reward"].mean())
        assert scalars.loc[step, "completion/length_mean"] == pytest.approx(rows["length"].mean())
        assert scalars.loc[step, "groups/kept"] == 4
        # the reward-hacking lens over every rank's completions, as rank 0 wrote their rows
        assert scalars.loc[step, "honesty/strict_checked"] == rows["strict_pass"].notna().sum()
    lens = honesty.from_samples(samples)[0].set_index("step")
    assert scalars["honesty/length_corr"].to_numpy() == pytest.approx(lens["honesty/length_corr"].to_numpy(),
                                                                       nan_ok=True)
    histograms = read_table(runs / "two", "histograms").set_index("step")
    tokens = histograms["tokens"]
    assert (histograms["counts"].map(sum) == tokens).all()
    # 4 passes over every completion token of both ranks
    assert (tokens == samples.groupby("step")["length"].sum() * 4).all()
    clipped = histograms["clipped_low"] + histograms["clipped_high"]
    assert (scalars["clip/total"] * tokens).round().astype(int).tolist() == clipped.tolist()
    detailed = set(read_table(runs / "two", "tokens")["group"])  # token_detail_groups 2: the first two, the most KL, ratio
    assert {0, 1} <= detailed <= {0, 1, 2, 3}


# --- refusals ------------------------------------------------------------------------------------


def test_refusal_on_rank_0_stops_every_rank_with_one_line(runs):
    result = run(torchrun(*trainer_args(runs, "two", "--max-steps", "2", *TINY)))
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and lines[0].startswith("error: name: a run named 'two' already exists")
    assert "exitcode  : 2" in result.stderr
    assert read_status(runs / "two" / "status.json")["state"] == "finished"  # untouched


# python -m grpo_lab.trainer with rank 0 the slower to refuse: the launcher ends every rank once one
# exits, so a rank 1 that left first would end rank 0 before its line (seen under a loaded machine)
SLOW_RANK_0 = """
import os, sys, time
from grpo_lab.trainer.__main__ import main

if os.environ["RANK"] == "0":
    time.sleep(3)
sys.exit(main(sys.argv[1:]))
"""


def test_prompts_must_divide_among_ranks(tmp_path):
    script = tmp_path / "slow_rank_0.py"
    script.write_text(SLOW_RANK_0)
    result = run(torchrun(str(script), *trainer_args(tmp_path, "odd", "--max-steps", "1", *TINY,
                                                      "--prompts-per-step", "5")[2:]))
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert lines == ["error: prompts_per_step: must be divisible by the number of processes (2), so each takes "
                     "whole groups, got 5"]
    assert not (tmp_path / "odd").exists()


# --- shutdown ------------------------------------------------------------------------------------


def test_sigterm_stops_every_rank_then_resumes_on_another_strategy(tmp_path):
    cmd = torchrun(*trainer_args(tmp_path, "term", "--max-steps", "500", *TINY, "--strategy", "fsdp",
                                 "--flush-seconds", "30"))
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_step(tmp_path / "term", 3, proc)
    proc.send_signal(signal.SIGTERM)  # to the launcher, which passes it to every rank
    proc.wait(timeout=60)
    status = read_status(tmp_path / "term" / "status.json")
    assert status["state"] == "stopped" and status["strategy"] == "fsdp"
    # the signal stopped it, not the doctor (a warning, e.g. constant rewards if the stop lands late, may be there)
    assert "stop_reason" not in status and "critical" not in status["findings"]
    step = status["step"]
    assert read_table(tmp_path / "term", "scalars")["step"].tolist() == list(range(1, step + 1))
    assert (tmp_path / "term" / "checkpoints" / f"step-{step:08d}" / "meta.json").is_file()

    # the FSDP checkpoint holds whole weights: two DDP ranks continue it
    result = run(torchrun(*trainer_args(tmp_path, "term", "--resume", "--strategy", "ddp",
                                        "--max-steps", str(step + 2))))
    assert result.returncode == 0, result.stderr[-3000:]
    assert read_status(tmp_path / "term" / "status.json")["state"] == "finished"
    assert read_table(tmp_path / "term", "scalars")["step"].tolist() == list(range(1, step + 3))
    assert len(read_table(tmp_path / "term", "samples")) == (step + 2) * 16


def test_a_rank_that_raises_fails_the_run_and_nobody_waits(tmp_path):
    start = time.time()
    result = run(torchrun(WORKER, "raise", "1", "2", *trainer_args(tmp_path, "crash", "--max-steps", "50", *TINY)[2:]),
                 timeout=120)
    assert result.returncode != 0
    assert time.time() - start < 90  # both processes ended (their collective failed), not a timeout
    status = read_status(tmp_path / "crash" / "status.json")
    assert status["state"] == "failed" and status["step"] == 1
    assert status["error"] == "rank 1: RuntimeError: boom on rank 1 at step 2"
    assert read_table(tmp_path / "crash", "scalars")["step"].tolist() == [1]


def test_rank_0_records_a_failure_even_while_stuck_in_a_collective(tmp_path):
    """As with NCCL, where a collective with a failed process waits instead of failing: rank 1
    reports a failure and hangs; rank 0's watcher records it and ends rank 0 within seconds."""
    start = time.time()
    result = run(torchrun(WORKER, "hang", "1", "2",
                          *trainer_args(tmp_path, "stuck", "--max-steps", "50", *TINY)[2:]), timeout=120)
    assert result.returncode != 0 and time.time() - start < 110  # not the 600 s collective timeout (15 s here)
    status = read_status(tmp_path / "stuck" / "status.json")
    assert status["state"] == "failed" and status["error"] == "rank 1: RuntimeError: stuck on purpose"
    assert read_table(tmp_path / "stuck", "scalars")["step"].tolist() == [1]


def test_a_killed_rank_fails_the_run_and_resume_continues_it(tmp_path):
    """README: "a process killed outright fails the run the same way and `--resume` continues it"."""
    run_dir = tmp_path / "kill"
    with (tmp_path / "torchrun.err").open("w") as err:
        proc = subprocess.Popen(torchrun(*trainer_args(tmp_path, "kill", "--max-steps", "500", *TINY,
                                                       "--checkpoint-every", "2")),
                                cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=err)
        try:
            wait_for_step(run_dir, 3, proc)  # the checkpoint of step 2 is on disk
            rank0, rank1 = rank_process(proc, 0), rank_process(proc, 1)
            killed = time.monotonic()
            rank1.kill()  # SIGKILL: no handler, no report in the store, no exit code of its own
            proc.wait(timeout=90)
            took = time.monotonic() - killed
        finally:
            end(proc)
    assert proc.returncode != 0
    assert took < 45  # rank 0's collective with the dead process failed; nothing waited for a timeout
    _, alive = psutil.wait_procs([rank0], timeout=10)
    assert not alive  # rank 0 ended too, not orphaned by the launcher
    assert f"exitcode  : -9 (pid: {rank1.pid})" in (tmp_path / "torchrun.err").read_text()  # rank 1 was killed
    status = read_status(run_dir / "status.json")
    assert status["state"] == "failed"  # written by rank 0 as it failed, not left "running"
    assert status["error"].startswith("another process ended without a report (killed?)")  # rank 0 is not blamed
    failed_at = status["step"]
    assert failed_at >= 3
    checkpoints = [int(c.name.removeprefix("step-")) for c in (run_dir / "checkpoints").glob("step-*")
                   if (c / "meta.json").is_file()]
    assert checkpoints and max(checkpoints) >= 2

    steps = failed_at + 2  # the steps after the checkpoint again, then two more
    result = run(torchrun(*trainer_args(tmp_path, "kill", "--resume", "--max-steps", str(steps))))
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"resuming kill after step {max(checkpoints)}" in (run_dir / "train.log").read_text()
    status = read_status(run_dir / "status.json")
    assert status["state"] == "finished" and status["step"] == steps and status["world_size"] == 2
    assert status["error"] is None
    assert_every_step_once(run_dir, steps)  # the rows logged after the checkpoint were not kept twice


# --- another world size ------------------------------------------------------------------------------


def test_a_two_process_run_resumes_on_one_process(runs, tmp_path):
    """README: checkpoints are whole weights, "so a run resumes with any number of processes"."""
    wide = copy_run(runs / "two", tmp_path, "wide")  # 2 steps on 2 ranks; its checkpoint of step 2
    assert read_status(wide / "status.json")["world_size"] == 2
    one = run_trainer(tmp_path, "wide", "--resume", "--max-steps", "4")  # plain python: one process
    assert one.returncode == 0, one.stderr[-3000:]
    assert "resuming wide after step 2" in (wide / "train.log").read_text()
    status = read_status(wide / "status.json")
    assert status["state"] == "finished" and status["step"] == 4
    assert status["world_size"] == 1 and status["strategy"] is None and status["devices"] == ["cpu"]
    assert_every_step_once(wide, 4)


# --- two machines ----------------------------------------------------------------------------------


def test_two_nodes_on_localhost(tmp_path):
    port = str(free_port())
    procs = [subprocess.Popen(torchrun(*trainer_args(tmp_path, "nodes", "--max-steps", "2", *TINY), nproc=1,
                                       launcher=("--nnodes", "2", "--node-rank", str(rank),
                                                 "--rdzv-endpoint", f"localhost:{port}")),
                              cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for rank in (0, 1)]
    for proc in procs:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err[-3000:]
    status = read_status(tmp_path / "nodes" / "status.json")
    assert status["state"] == "finished" and status["world_size"] == 2
    assert len(read_table(tmp_path / "nodes", "samples")) == 2 * 4 * 4


# --- accelerate launch -------------------------------------------------------------------------------


def test_accelerate_launch_on_the_cpu(tmp_path):
    """README's `accelerate launch --multi_gpu --num_processes 2 -m grpo_lab.trainer`, here on gloo."""
    result = run(accelerate("-m", *trainer_args(tmp_path, "acc", "--max-steps", "2", *TINY)[1:]))
    assert result.returncode == 0, result.stderr[-3000:]
    status = read_status(tmp_path / "acc" / "status.json")
    assert status["state"] == "finished" and status["step"] == 2
    assert status["world_size"] == 2 and status["strategy"] == "ddp" and status["devices"] == ["cpu", "cpu"]
    assert_every_step_once(tmp_path / "acc", 2)
