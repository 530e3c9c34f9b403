"""report_to: a run sent to TensorBoard, wandb and trackio reads back from each tracker's own files equal to
the run folder (every scalar at its step, the config, each step's completions); a tracker that fails, is
missing or is slow never stops or slows the run. These tests need requirements-trackers.txt (CI installs
it): without it they fail, naming the file, rather than skip."""

from __future__ import annotations

import importlib
import json
import logging
import math
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from grpo_lab.rundir import trackers
from grpo_lab.rundir.trackers import tensorboard_files, trackio_store, wandb_files
from grpo_lab.trainer.config import ConfigError, from_dict
from grpo_lab.trainer.run import train
from trainer_helpers import read_table, wait_until

STEPS = 2
BASE = {"prompts_per_step": 4, "group_size": 4, "sft_steps": 20, "flush_seconds": 0, "max_steps": STEPS,
        "rewards": {"correctness": 1.0, "length": 0.1}}
PROJECT = "grpo-lab-tests"


def need_trackers() -> None:
    missing = [name for name in ("tensorboard", "wandb", "trackio") if importlib.util.find_spec(name) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: pip install -r requirements-trackers.txt")


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    """One tiny run reported to all three trackers (wandb offline, trackio's store in a folder of the test's)."""
    need_trackers()
    root = tmp_path_factory.mktemp("trackers")
    with pytest.MonkeyPatch.context() as mp:
        for name in ("WANDB_MODE", "WANDB_API_KEY"):
            mp.delenv(name, raising=False)  # the default: offline
        for name in ("WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_CONFIG_DIR"):
            mp.setenv(name, str(root / "wandb-home"))
        mp.setenv("TRACKIO_PROJECT", PROJECT)
        if "trackio" not in sys.modules:  # trackio reads TRACKIO_DIR once, on import
            mp.setenv("TRACKIO_DIR", str(root / "trackio"))
        assert train(from_dict({**BASE, "runs_dir": str(root / "runs"), "name": "tracked",
                                "report_to": "tensorboard,wandb,trackio"})) == 0
        yield root / "runs" / "tracked"


def readers(run_dir: Path) -> dict:
    return {"tensorboard": tensorboard_files.read(run_dir / tensorboard_files.FOLDER),
            "wandb": wandb_files.read(run_dir / "wandb"),
            "trackio": trackio_store.read(PROJECT, run_dir.name)}


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize("tracker", ["tensorboard", "wandb", "trackio"])
def test_every_scalar_reads_back_equal_at_its_step(tracked, tracker):
    scalars = read_table(tracked, "scalars").set_index("step")
    logged = readers(tracked)[tracker]
    assert sorted(logged.scalars) == list(range(1, STEPS + 1))
    for step, row in scalars.iterrows():
        expected = {k: float(v) for k, v in row.items() if k != "time"}  # time: the event's own time
        if tracker == "tensorboard":  # TensorBoard keeps a scalar as a 32-bit float
            expected = {k: float(np.float32(v)) for k, v in expected.items()}
        got = logged.scalars[step]
        assert set(got) == set(expected), set(got) ^ set(expected)
        assert all(same(got[k], expected[k]) for k in expected), {k: (got[k], v) for k, v in expected.items()
                                                                   if not same(got[k], v)}
    if tracker == "tensorboard":  # the row's own time is the event's wall time
        assert all(abs(logged.times[s] - scalars.loc[s, "time"]) < 1e-3 for s in scalars.index)


@pytest.mark.parametrize("tracker", ["tensorboard", "wandb", "trackio"])
def test_the_config_is_logged_once_as_config_json_has_it(tracked, tracker):
    config = readers(tracked)[tracker].config
    assert config["name"] == "tracked" and config["report_to"] == "tensorboard,wandb,trackio"
    assert config["rewards"] == {"correctness": 1.0, "length": 0.1} and config["group_size"] == 4


@pytest.mark.parametrize("tracker", ["wandb", "trackio"])
def test_each_step_has_its_completions_table_with_the_group_key(tracked, tracker):
    samples = read_table(tracked, "samples")
    tables = readers(tracked)[tracker].tables
    assert sorted(tables) == list(range(1, STEPS + 1))
    for step, rows in tables.items():
        want = samples[samples["step"] == step]
        assert len(rows) == len(want)
        assert {"prompt", "completion", "reward", "advantage", "group", "prompt_id", "rewards/correctness",
                "rewards/length"} <= set(rows[0])
        assert [r["completion"] for r in rows] == want["completion"].tolist()
        assert [(r["group"], r["prompt_id"]) for r in rows] == list(zip(want["group"], want["prompt_id"]))
        assert np.allclose([r["advantage"] for r in rows], want["advantage"])


def test_tensorboard_files_sit_inside_the_run_folder_and_wandb_is_offline(tracked):
    assert list((tracked / "tensorboard").glob("events.out.tfevents.*"))
    assert list((tracked / "wandb").glob("offline-run-*/run-*.wandb"))


def test_a_failing_and_a_missing_tracker_leave_the_run_finished_and_complete(tmp_path, monkeypatch):
    """TensorBoard raises at step 2, wandb is not importable: one warning each, every step in the run folder."""
    need_trackers()
    real = tensorboard_files.TensorBoardSink.scalars

    def breaks(self, step, time, values):
        if step == 2:
            raise OSError("planted: the disk of the event files is gone")
        real(self, step, time, values)

    monkeypatch.setattr(tensorboard_files.TensorBoardSink, "scalars", breaks)
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
    assert train(from_dict({**BASE, "runs_dir": str(tmp_path), "name": "planted",
                            "report_to": "tensorboard,wandb"})) == 0
    run = tmp_path / "planted"
    assert '"state": "finished"' in (run / "status.json").read_text().replace("'", '"')
    assert read_table(run, "scalars")["step"].tolist() == [1, 2]
    assert read_table(run, "samples")["step"].nunique() == 2
    lines = [line for line in (run / "train.log").read_text().splitlines() if "report_to" in line]
    assert len(lines) == 2, lines
    assert any("tensorboard OSError: planted" in line for line in lines)
    assert any("wandb needs the wandb package (pip install -r requirements-trackers.txt)" in line for line in lines)
    assert sorted(tensorboard_files.read(run / "tensorboard").scalars) == [1]  # what it had before it broke


# --- the reporter alone: a slow tracker, a broken one, the bad option -----------------------------


class Recording:
    """A sink that keeps the steps it was given; `gate`: each write waits for it (a tracker stuck on its server)."""

    def __init__(self, gate: threading.Event | None = None, fail_at: int | None = None):
        self.gate, self.fail_at, self.steps, self.closed = gate, fail_at, [], False

    def scalars(self, step, time, values):
        if step == self.fail_at:
            raise RuntimeError("planted")
        if self.gate is not None:
            self.gate.wait()
        self.steps.append(step)

    def table(self, step, columns):
        pass

    def close(self):
        self.closed = True


def row(step: int) -> dict[str, list]:
    return {"step": [step], "time": [1000.0 + step], "wall_s": [float(step)], "reward/mean": [0.5]}


def test_a_stuck_tracker_never_holds_the_steps_and_says_so_once(caplog):
    gate = threading.Event()
    stuck, quick = Recording(gate=gate), Recording()
    reporter = trackers.Reporter({"stuck": lambda: stuck, "quick": lambda: quick}, logging.getLogger("t"), rows=4)
    with caplog.at_level(logging.WARNING):
        for step in range(1, 21):  # each returns while `stuck` has not finished its first write
            reporter.send("scalars", row(step))
            wait_until(lambda: quick.steps[-1:] == [step], timeout=10, what=f"the other tracker's step {step}")
        assert stuck.steps == []
        gate.set()
        reporter.close(seconds=10)
    assert quick.steps == list(range(1, 21)) and quick.closed
    assert 0 < len(stuck.steps) <= 5 and stuck.steps == sorted(stuck.steps) and stuck.closed  # 1 taken, 4 queued
    behind = [r.message for r in caplog.records if "falling behind" in r.message]
    assert len(behind) == 1 and "stuck" in behind[0]


def test_a_tracker_that_raises_stops_alone_with_one_warning(caplog):
    broken, fine = Recording(fail_at=3), Recording()
    reporter = trackers.Reporter({"broken": lambda: broken, "fine": lambda: fine}, logging.getLogger("t"))
    with caplog.at_level(logging.WARNING):
        for step in range(1, 7):
            reporter.send("scalars", row(step))
        reporter.close(seconds=10)
    assert broken.steps == [1, 2] and broken.closed and fine.steps == list(range(1, 7))
    warnings = [r.message for r in caplog.records if "report_to" in r.message]
    assert warnings == ["report_to: broken RuntimeError: planted; the run goes on without it (the run folder "
                        "is complete)"]


@pytest.mark.parametrize("given", ["mlflow", "tensorboard,comet", "wandb;trackio"])
def test_an_unknown_tracker_is_one_line_naming_the_option(given):
    with pytest.raises(ConfigError, match=r"^report_to: must be none or a comma list of tensorboard, wandb, trackio"):
        from_dict({"report_to": given})


def test_a_config_file_may_list_the_trackers(tmp_path):
    from grpo_lab.trainer.config import load_config

    path = tmp_path / "c.yaml"
    path.write_text("report_to: [tensorboard, wandb]\n")
    assert load_config(["--config", str(path), "--runs-dir", str(tmp_path)]).report_to == "tensorboard,wandb"
    assert load_config(["--report-to", "trackio", "--runs-dir", str(tmp_path)]).report_to == "trackio"


# --- round trips: the run folder -> a tracker -> grpo-lab-import -> a run folder equal to the first ---------


def imported(tracked: Path, tracker: str) -> Path:
    """The tracked run read back from `tracker` by grpo-lab-import (once per tracker and module)."""
    target = tracked.parent / f"back-{tracker}"
    if not target.exists():
        source = {"tensorboard": tracked / "tensorboard", "wandb": tracked / "wandb",
                  "trackio": Path(sys.modules["trackio"].utils.TRACKIO_DIR)}[tracker]
        extra = ["--run", f"{PROJECT}/{tracked.name}"] if tracker == "trackio" else []
        cli = importlib.import_module("grpo_lab.rundir.import")
        assert cli.main([str(source), "--name", target.name, "--runs-dir", str(tracked.parent), *extra]) == 0
    return target


@pytest.mark.parametrize("tracker", ["tensorboard", "wandb", "trackio"])
def test_a_run_exported_to_a_tracker_imports_back_equal(tracked, tracker):
    readers(tracked)  # trackio imported with this module's store
    back = imported(tracked, tracker)
    a, b = read_table(tracked, "scalars").set_index("step"), read_table(back, "scalars").set_index("step")
    assert list(b.index) == list(a.index) and set(b.columns) == set(a.columns)
    for column in a.columns.drop("time"):  # time: the tracker's own time of the step
        want = a[column].astype("float32") if tracker == "tensorboard" else a[column]
        assert np.array_equal(b[column].to_numpy(float), want.to_numpy(float), equal_nan=True), column
    config = json.loads((back / "config.json").read_text())
    assert config["name"] == back.name and config["source"] == tracker and config["group_size"] == 4
    if tracker == "tensorboard":  # no tables in TensorBoard
        assert read_table(back, "samples").empty
        return
    keep = ["step", "group", "prompt_id", "sample_idx", "prompt", "completion", "reward", "advantage",
            "rewards/correctness", "rewards/length"]
    want, got = read_table(tracked, "samples")[keep], read_table(back, "samples")[keep]
    assert got.reset_index(drop=True).equals(want.reset_index(drop=True))
