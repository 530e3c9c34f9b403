"""Runs that cannot be corrupted: one writer per run, a compaction killed half-way rolled forward on
resume, half-written checkpoints cleaned up, sizes and numbers refused before anything is written,
and a full disk (a real one: a small tmpfs) said where the user looks, with no half-made run left."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from grpo_lab.rundir.layout import RunPaths, visible_parts
from grpo_lab.rundir.writer import RunWriter
from shared_runs import copy_run, one_pass_run  # noqa: F401 (a fixture: pytest finds it by name)
from trainer_helpers import ROOT, SMALL, read_table, run_trainer, start_trainer, trainer_cmd, wait_for_state


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
        wait_for_state(tmp_path / "busy", "running", proc)
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
    from grpo_lab.rundir.layout import RunPaths
    from grpo_lab.rundir.writer import RunWriter
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


def test_half_written_checkpoints_are_removed_on_resume(tmp_path, one_pass_run):
    partial = copy_run(one_pass_run, tmp_path, "c") / "checkpoints" / ".tmp-killed"  # a copy of a 2-step run
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
    (["--rewards", "correctness=nan"], "rewards: must name at least one reward (or an environment whose get_reward "
                                       "scores), each with a finite weight"),
    (["--group-size", "100000000"], "group_size: must be in [1, 1024]"),
    (["--prompts-per-step", "100000000"], "prompts_per_step: must be in [1, 65536]"),
    (["--prompts-per-step", "1000", "--group-size", "1000"], "prompts_per_step: times group_size (1000)"),
    (["--name", "nl\n"], "name: must be 1-100 of letters"),
])
def test_numbers_and_sizes_that_cannot_work_are_refused_with_one_line(tmp_path, flags, message):
    result = run_trainer(tmp_path, "x", *flags) if "--name" not in flags else subprocess.run(
        [sys.executable, "-m", "grpo_lab.trainer", "--runs-dir", str(tmp_path), *flags], cwd=ROOT, capture_output=True,
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


# --- a full disk --------------------------------------------------------------------------------
# Run inside a user and mount namespace (no privileges needed) with a tmpfs of a few MB mounted on
# the runs folder: writes there fail with ENOSPC as on any full disk. The namespace's mount goes
# with it, so the script inside reports what it saw as one JSON line.

ON_A_SMALL_DISK = textwrap.dedent("""
    import json, os, shutil, subprocess, sys, time
    from pathlib import Path
    from grpo_lab.rundir.layout import read_json
    from grpo_lab.rundir.status import read_status
    disk = Path(sys.argv[1])
    FLAGS = ["--prompts-per-step", "4", "--group-size", "4", "--sft-steps", "5", "--flush-seconds", "0"]

    def trainer(name, *args):
        cmd = [sys.executable, "-m", "grpo_lab.trainer", "--runs-dir", str(disk), "--name", name, *FLAGS, *args]
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def fill(keep=0):
        \"\"\"Take the disk's free space but `keep` bytes, once: a trainer freeing its reserve later keeps it.\"\"\"
        left = shutil.disk_usage(disk).free - keep
        try:  # the trainer may have taken the last block already: then even the pad's open finds it full
            with open(disk / f"pad-{time.time_ns()}", "wb") as fh:
                while left > 0:
                    fh.write(b"\\0" * min(left, 1 << 16))
                    fh.flush()
                    left -= 1 << 16
        except OSError:
            pass  # full: what was asked for

    def unfill():
        for pad in disk.glob("pad-*"):
            pad.unlink()

    def files(folder):
        return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*")) if Path(folder).exists() else None

    def raw_status(name):  # as the trainer wrote it, not as a reader completes it
        return read_json(disk / name / "status.json") or {}
""")


def on_a_small_disk(tmp_path, size_kb: int, script: str) -> dict:
    """`script`, after ON_A_SMALL_DISK, on a tmpfs of `size_kb` KB; what it printed last, as JSON."""
    assert shutil.which("unshare"), "the full-disk tests need unshare (util-linux) to mount a small tmpfs"
    disk = tmp_path / "disk"
    disk.mkdir()
    probe = tmp_path / "probe.py"
    probe.write_text(ON_A_SMALL_DISK + textwrap.dedent(script))
    done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                           'mount -t tmpfs -o "size=$1k" tmpfs "$2" && exec "$3" "$4" "$2"', "sh", str(size_kb),
                           str(disk), sys.executable, str(probe)],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=600)
    # No skip: without a mount namespace this finding cannot be checked, and that must show.
    assert done.returncode == 0, f"no user and mount namespace here, or the script failed:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_run_created_on_a_full_disk_leaves_nothing_and_says_so(tmp_path):
    seen = on_a_small_disk(tmp_path, 4096, """
        other = disk / "other"  # another run's files: never touched
        other.mkdir()
        (other / "config.json").write_text("{}")
        out = {}
        # tmpfs counts 4 KB pages. Full: the lock's pid fails; then the reserve; then config.json; then status.json
        cases = {"full": 0, "under_reserve": 100 * 1024, "after_reserve": 256 * 1024 + 4096,
                 "after_config": 256 * 1024 + 8192}
        for case, keep in cases.items():
            fill(keep)
            proc = trainer("new", "--max-steps", "1")
            _, err = proc.communicate(timeout=300)
            out[case] = {"rc": proc.returncode, "stderr": err, "left": files(disk / "new")}
            unfill()
        proc = trainer("new", "--max-steps", "1")  # with room again, the name is free
        _, err = proc.communicate(timeout=300)
        out["room"] = {"rc": proc.returncode, "stderr": err[-2000:], "state": raw_status("new").get("state")}
        fill(256 * 1024 + 140 * 1024)  # the run's first files fit; its initial checkpoint (340 KB) does not
        proc = trainer("setup", "--max-steps", "1")
        _, err = proc.communicate(timeout=300)
        out["setup"] = {"rc": proc.returncode, "stderr": err[-2000:], "status": raw_status("setup"),
                        "files": files(disk / "setup")}
        out["other"] = files(other)
        print(json.dumps(out))
    """)
    for case in ("full", "under_reserve", "after_reserve", "after_config"):
        result = seen[case]
        assert result["rc"] == 2, (case, result["stderr"][-3000:])
        assert result["stderr"].strip().count("\n") == 0, (case, result["stderr"])
        assert result["stderr"].startswith("error: runs_dir: cannot create run 'new' in "), (case, result["stderr"])
        assert "No space left on device" in result["stderr"], (case, result["stderr"])
        assert result["left"] is None, (case, result["left"])  # no half-made folder
    assert seen["room"]["rc"] == 0 and seen["room"]["state"] == "finished", seen["room"]["stderr"]
    assert seen["other"] == ["config.json"]
    # a run whose files exist stays, as a failed run that says why (and can be resumed)
    setup = seen["setup"]
    assert setup["rc"] == 1 and setup["status"].get("state") == "failed", setup["stderr"]
    assert "No space left on device" in setup["status"]["error"]
    assert "config.json" in setup["files"] and not [f for f in setup["files"] if ".tmp-" in f or ".reserve" in f]


def test_a_disk_that_fills_mid_run_ends_it_as_failed_with_the_reason(tmp_path):
    seen = on_a_small_disk(tmp_path, 32 * 1024, """
        dead = subprocess.Popen(["true"])
        dead.wait()
        ghost = disk / "ghost"  # a run whose trainer died without a word: only the disk can explain
        ghost.mkdir()
        (ghost / "status.json").write_text(json.dumps({"state": "running", "pid": dead.pid, "step": 3}))
        proc = trainer("mid", "--max-steps", "50")
        deadline = time.time() + 300
        while ((read_status(disk / "mid" / "status.json") or {}).get("step") or 0) < 2:
            assert proc.poll() is None and time.time() < deadline, proc.stderr.read()
            time.sleep(0.05)
        fill()
        _, err = proc.communicate(timeout=300)
        out = {"rc": proc.returncode, "stderr": err[-3000:], "status": raw_status("mid"),
               "log": (disk / "mid" / "train.log").read_text()[-3000:], "files": files(disk / "mid"),
               "ghost_full": read_status(ghost / "status.json")["error"]}
        unfill()
        out["ghost_room"] = read_status(ghost / "status.json")["error"]
        resumed = trainer("mid", "--resume", "--max-steps", "3")  # nothing lost that a resume needs
        _, err = resumed.communicate(timeout=300)
        out["resumed"] = {"rc": resumed.returncode, "stderr": err[-2000:], "state": raw_status("mid").get("state")}
        print(json.dumps(out))
    """)
    assert seen["rc"] == 1, seen["stderr"]
    status = seen["status"]  # as written by the trainer, not supplied by a reader
    assert status.get("state") == "failed" and "No space left on device" in status["error"], (status, seen["stderr"])
    assert status["step"] >= 2
    assert "No space left on device" in seen["log"] and "ERROR failed at step" in seen["log"]
    assert ".reserve" not in seen["files"] and not [f for f in seen["files"] if ".tmp-" in f], seen["files"]
    assert seen["ghost_full"].startswith("trainer process ended without reporting, on a full disk: No space left on "
                                         "device ("), seen["ghost_full"]
    assert seen["ghost_room"] == "trainer process ended without reporting (killed?)"
    assert seen["resumed"]["rc"] == 0 and seen["resumed"]["state"] == "finished", seen["resumed"]["stderr"]
