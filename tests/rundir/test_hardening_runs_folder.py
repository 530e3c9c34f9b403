"""What a runs folder may contain: readers open only regular files inside the run (a symlinked
train.log, a FIFO part or status.json each give one line, and nothing blocks), and Stop signals only
the trainer of this very run folder."""

import os
import signal
import subprocess
import sys
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app_helpers import open_page
from grpo_lab.launching import form_checks, identity, process_control
from grpo_lab.launching.keys import KEY_DIR_ENV, NONCE_ENV, run_nonce
from grpo_lab.rundir import query, reader
from grpo_lab.rundir.layout import part_name, write_json_atomic
from shared_runs import copy_run, grpo_run  # noqa: F401 (a fixture: pytest finds it by name)
from trainer_helpers import wait_until

SECRET = "root:$6$not-for-your-eyes"


def within(seconds, fn, *args):
    """fn(*args) in a thread; fails (rather than hangs) when it has not returned after `seconds`."""
    out = []
    worker = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert out, f"{fn.__name__} still blocked after {seconds} s"
    return out[0]


@pytest.fixture
def run(tmp_path):
    """runs/r: status, config, a real samples part, and a secret file outside the runs folder."""
    folder = tmp_path / "runs" / "r"
    write_json_atomic(folder / "status.json", {"state": "finished", "pid": 0, "step": 2, "started_at": 1.0})
    write_json_atomic(folder / "config.json", {"name": "r"})
    samples = folder / "tables" / "samples"
    samples.mkdir(parents=True)
    pq.write_table(pa.table({"step": [1, 1], "group": [0, 0], "sample_idx": [0, 1], "reward": [1.0, 0.0]}),
                   samples / part_name(1, 1))
    (tmp_path / "shadow").write_text(SECRET + "\n")
    return folder


def test_a_train_log_symlinked_out_of_the_run_is_not_shown_and_said_once(run):
    (run / "train.log").symlink_to(run.parent.parent / "shadow")
    text, problem = reader.tail_checked(run / "train.log")
    assert text == "" and reader.tail(run / "train.log") == ""
    assert problem == "train.log leads outside r/ (a symlink?), so it is not read"
    lines = [p for p in reader.read_run(run.parent, "r").problems if "train.log" in p]
    assert lines == [problem]


def test_a_symlink_that_stays_inside_the_run_is_still_read(run):
    (run / "old.log").write_text("one\ntwo\n")
    (run / "train.log").symlink_to(run / "old.log")
    assert reader.tail_checked(run / "train.log") == ("one\ntwo", None)


def test_a_fifo_log_or_status_gives_one_line_and_blocks_nothing(run):
    os.mkfifo(run / "train.log")
    (run / "status.json").unlink()
    os.mkfifo(run / "status.json")
    assert within(5, reader.tail_checked, run / "train.log") == (
        "", "train.log is not a regular file (a FIFO or a device?), so it is not read")
    info = within(5, reader.read_run, run.parent, "r")
    assert info.status is None and sum("status.json is not a regular file" in p for p in info.problems) == 1


def test_only_the_end_of_a_big_log_is_read(run):
    (run / "train.log").write_bytes(b"x" * 5_000_000 + b"\nlast line\n")
    assert reader.tail(run / "train.log", lines=1) == "last line"
    assert len(reader.tail(run / "train.log", lines=10**6)) <= reader.LOG_TAIL_BYTES


def test_a_fifo_samples_part_is_skipped_with_one_line_and_the_rest_is_read(run):
    samples = run / "tables" / "samples"
    os.mkfifo(samples / part_name(2, 2))
    frame, problems = within(10, query.query, run, "samples", "SELECT count(*) AS n FROM {src}")
    assert int(frame["n"][0]) == 2
    assert problems == [f"samples/{part_name(2, 2)} is not a regular file (a FIFO or a device?), so it is not read; "
                        "skipped"]
    read = within(10, reader.TableReader(run, "samples").read)
    assert read.table.num_rows == 2 and len(read.problems) == 1


def test_a_part_symlinked_out_of_the_run_is_skipped(run, tmp_path):
    outside = tmp_path / "outside.parquet"
    pq.write_table(pa.table({"step": [9], "group": [0], "sample_idx": [0], "reward": [5.0]}), outside)
    (run / "tables" / "samples" / part_name(9, 9)).symlink_to(outside)
    frame, problems = query.query(run, "samples", "SELECT max(step) AS s FROM {src}")
    assert int(frame["s"][0]) == 1 and len(problems) == 1 and "leads outside r/" in problems[0]


def test_the_groups_and_runs_pages_still_draw_over_a_fifo_part_and_a_symlinked_log(grpo_run, tmp_path, monkeypatch):
    run = copy_run(grpo_run, tmp_path / "runs", "r")  # a copy: this test plants a FIFO and a symlink in it
    os.mkfifo(run / "tables" / "samples" / part_name(90, 90))
    (run / "train.log").unlink()
    (run / "train.log").symlink_to(tmp_path / "shadow")
    (tmp_path / "shadow").write_text(SECRET + "\n")
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(run.parent))
    for page in ("groups", "runs"):
        at = within(60, open_page, page, "r")
        kinds = (at.markdown, at.warning, at.code, at.error, at.caption)
        shown = " ".join(str(e.value) for kind in kinds for e in kind)
        assert SECRET not in shown, page
        if page == "groups":
            assert f"{part_name(90, 90)} is not a regular file" in shown
    assert "train.log leads outside r/" in shown  # the Runs page says why the log is empty


# --- Stop signals only this folder's trainer ------------------------------------------------------


@pytest.fixture
def fake_trainer(tmp_path):
    """Start `python -m grpo_lab.trainer ARGS` where grpo_lab.trainer is a stand-in that only sleeps
    (the command line, cwd and environment are what a real one has, without a minute of start-up)."""
    pkg = tmp_path / "fake" / "grpo_lab" / "trainer"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text("import time\ntime.sleep(120)\n")
    procs = []

    def start(*args, env=None, module=True):
        command = [sys.executable, "-m", "grpo_lab.trainer", *args] if module else [sys.executable, *args]
        clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", NONCE_ENV)}
        proc = subprocess.Popen(command, cwd=pkg.parent.parent, env={**clean, **(env or {})})
        procs.append(proc)
        wait_until(lambda: identity.cmdline(proc.pid)[-1:] == [args[-1]], what="the process to exec")
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def running(runs, name, pid):
    write_json_atomic(runs / name / "status.json", {"state": "running", "pid": pid, "step": 1})


def test_stop_refuses_a_decoy_whose_arguments_mention_the_trainer(tmp_path, fake_trainer):
    runs = tmp_path / "runs"
    decoy = fake_trainer("-c", "import time; time.sleep(120)", "grpo_lab.trainer", "--name", "X",
                         "--runs-dir", str(runs), module=False)
    running(runs, "X", decoy.pid)
    with pytest.raises(form_checks.LaunchError, match=f"process {decoy.pid} is not the trainer of X in {runs}"):
        process_control.stop(runs, "X")
    assert decoy.poll() is None


def test_stop_refuses_a_namesake_trainer_of_another_runs_folder(tmp_path, fake_trainer, monkeypatch):
    monkeypatch.setenv(KEY_DIR_ENV, str(tmp_path / "keys"))
    runs, other = tmp_path / "runs", tmp_path / "other"
    by_hand = fake_trainer("--name", "X", "--runs-dir", str(other))
    running(runs, "X", by_hand.pid)
    with pytest.raises(form_checks.LaunchError, match="is not the trainer of X"):
        process_control.stop(runs, "X")
    # launched by a dashboard for the other folder, and lying about its --runs-dir: its nonce tells
    liar = fake_trainer("--name", "X", "--runs-dir", str(runs),
                        env={NONCE_ENV: run_nonce(other, "X")})
    running(runs, "X", liar.pid)
    with pytest.raises(form_checks.LaunchError, match="is not the trainer of X"):
        process_control.stop(runs, "X")
    assert by_hand.poll() is None and liar.poll() is None


@pytest.mark.parametrize("how", ["nonce", "by hand, --runs-dir", "by hand, relative default"])
def test_stop_signals_this_folders_own_trainer(tmp_path, fake_trainer, monkeypatch, how):
    monkeypatch.setenv(KEY_DIR_ENV, str(tmp_path / "keys"))
    runs = tmp_path / "fake" / "runs"  # the stand-in's working directory is tmp_path/fake: ./runs is this folder
    if how == "nonce":
        proc = fake_trainer("--name", "X", "--runs-dir", str(runs),
                            env={NONCE_ENV: run_nonce(runs, "X")})
    elif how == "by hand, --runs-dir":
        proc = fake_trainer("--name", "X", "--runs-dir", str(runs))
    else:
        proc = fake_trainer("--name", "X", env={"GRPO_LAB_RUNS_DIR": ""})
    running(runs, "X", proc.pid)
    assert process_control.stop(runs, "X") == proc.pid
    assert proc.wait(timeout=10) == -signal.SIGTERM
