"""Runs that cannot be corrupted: one writer per run, a compaction killed half-way rolled forward on
resume, half-written checkpoints cleaned up, sizes and numbers refused before anything is written."""

import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest

from rundir.layout import RunPaths, visible_parts
from rundir.status import read_status
from rundir.writer import RunWriter
from trainer_helpers import ROOT, SMALL, read_table, run_trainer, start_trainer, trainer_cmd


def test_two_trainers_with_one_name_at_once_one_wins_the_other_exits_2(tmp_path):
    flags = [*SMALL, "--max-steps", "6", "--checkpoint-every", "3", "--compact-every", "2"]
    procs = [subprocess.Popen(trainer_cmd(tmp_path, "same", *flags, "--seed", str(seed)), cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for seed in (1, 2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    loser = next(err for code, err in results if code == 2)
    assert loser.strip().count("\n") == 0 and "name: a run named 'same'" in loser
    samples = read_table(tmp_path / "same", "samples")
    assert samples.groupby("step").size().tolist() == [16] * 6  # one trainer's steps, each exactly once


def test_a_run_being_trained_cannot_be_resumed_by_a_second_trainer(tmp_path):
    proc = start_trainer(tmp_path, "busy", *SMALL, "--max-steps", "100000")
    try:
        deadline = time.time() + 120
        while (read_status(tmp_path / "busy" / "status.json") or {}).get("state") != "running":
            assert time.time() < deadline and proc.poll() is None
            time.sleep(0.2)
        second = run_trainer(tmp_path, "busy", "--resume")
        assert second.returncode == 2
        assert second.stderr.strip().endswith("stop it first") and f"pid {proc.pid}" in second.stderr
    finally:
        proc.kill()
        proc.wait()
    # SIGKILL releases the lock with the process: the run resumes
    assert run_trainer(tmp_path, "busy", "--resume", "--max-steps", "2").returncode == 0


KILL_IN_COMPACTION = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from rundir.layout import RunPaths
    from rundir.writer import RunWriter
    writer = RunWriter(RunPaths(Path(sys.argv[1])), "scalars", 0, 100)
    for step in range(1, 7):
        writer.log("scalars", {"step": [step], "x": [float(step)]})
        writer.flush()
    Path.unlink = lambda self, missing_ok=False: os._exit(9)  # killed after the merged part is written
    writer.tables["scalars"].compact()
""")


def test_a_kill_inside_compaction_leaves_no_stale_rows_after_resume(tmp_path):
    run = tmp_path / "r"
    done = subprocess.run([sys.executable, "-c", KILL_IN_COMPACTION, str(run)], cwd=ROOT, env={"PYTHONPATH": str(ROOT)})
    assert done.returncode == 9
    folder = RunPaths(run).table("scalars")
    assert len(list(folder.glob("part-*"))) == 7  # the merged part and the six it was replacing
    writer = RunWriter(RunPaths(run), "scalars", 0, 100)
    writer.truncate_after(4)  # what --resume does after loading the step-4 checkpoint
    for step in (5, 6):  # the resumed steps, written again
        writer.log("scalars", {"step": [step], "x": [10.0 * step]})
    writer.close()
    files = sorted(p.name for p in folder.iterdir())
    assert [p.name for p in visible_parts(folder)] == files  # nothing hidden left to reappear
    rows = pd.concat([pd.read_parquet(p) for p in visible_parts(folder)]).sort_values("step")
    assert rows["step"].tolist() == [1, 2, 3, 4, 5, 6] and rows["x"].tolist() == [1, 2, 3, 4, 50, 60]


def test_half_written_checkpoints_are_removed_on_resume(tmp_path):
    assert run_trainer(tmp_path, "c", *SMALL, "--max-steps", "2", "--beta", "0").returncode == 0
    partial = tmp_path / "c" / "checkpoints" / ".tmp-killed"
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"half")
    assert run_trainer(tmp_path, "c", "--resume", "--max-steps", "3").returncode == 0
    assert not partial.exists()


@pytest.mark.parametrize("flags, message", [
    (["--lr", "inf"], "lr: must be a finite number"),
    (["--lr", "1e300"], "lr: must be in (0, 1]"),
    (["--beta", "inf"], "beta: must be a finite number"),
    (["--epsilon", "1e300"], "epsilon: must be in (0, 10]"),
    (["--temperature", "1e-300"], "temperature: must be in [0.01, 100]"),
    (["--rewards", "correctness=nan"], "rewards: must name at least one reward, each with a finite weight"),
    (["--group-size", "100000000"], "group_size: must be in [1, 1024]"),
    (["--prompts-per-step", "100000000"], "prompts_per_step: must be in [1, 65536]"),
    (["--prompts-per-step", "1000", "--group-size", "1000"], "prompts_per_step: times group_size (1000)"),
    (["--name", "nl\n"], "name: must be 1-100 of letters"),
])
def test_numbers_and_sizes_that_cannot_work_are_refused_with_one_line(tmp_path, flags, message):
    result = run_trainer(tmp_path, "x", *flags) if "--name" not in flags else subprocess.run(
        [sys.executable, "-m", "trainer", "--runs-dir", str(tmp_path), *flags], cwd=ROOT, capture_output=True,
        text=True)
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0, result.stderr
    assert message in result.stderr
    assert not any(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("name, content, message", [
    ("bad.jsonl", b'{"prompt": "1+1=", "answer": "2"}\n{"prompt": "caf\xe9", "answer": "3"}\n',
     "task: bad.jsonl, line 2: not UTF-8 text"),
    ("bad.csv", b"prompt,answer\n1+1=,2\ncaf\xe9,3\n", "task: bad.csv, line 3: not UTF-8 text"),
    ("huge.jsonl", b'{"prompt": "1+1=", "answer": "2"}\n{"prompt": "' + b"x" * 5_000_000 + b'", "answer": "1"}\n',
     "task: huge.jsonl, line 2: longer than 4 MB"),
    ("long.jsonl", b'{"prompt": "' + b"y" * 200_000 + b'", "answer": "1"}\n',
     "task: long.jsonl, row 1, column 'prompt': prompt of 200000 characters; at most 100000"),
])
def test_a_broken_task_file_gets_one_line_naming_the_line_and_leaves_nothing(tmp_path, name, content, message):
    data = tmp_path / name
    data.write_bytes(content)
    runs = tmp_path / "runs"
    result = run_trainer(runs, "x", "--task", str(data))
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0, result.stderr[-3000:]
    assert message in result.stderr
    assert not runs.exists() or not any(runs.iterdir())
