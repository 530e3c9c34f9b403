"""Hostile imports: what a planted verl dump or TRL folder may hold. Each hostile input gets exit status 2
and one line naming the file (and line), never a traceback or a hang, and leaves no run and no
`.tmp-import-*` folder behind (importers/limits.py holds the limits)."""

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grpo_lab.rundir.importers import build, limits
from grpo_lab.rundir.layout import RunPaths
from grpo_lab.rundir.reader import read_run
from run_sources import trl_folder
from trainer_helpers import read_table

cli = importlib.import_module("grpo_lab.rundir.import")
ROOT = Path(__file__).resolve().parents[2]


def good_line(score=1.0, **extra) -> str:
    return json.dumps({"input": "2+2=", "output": "4", "score": score, "step": 1, **extra})


def dump(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def two_good_lines() -> str:
    return good_line(1.0) + "\n" + good_line(0.0) + "\n"


def verl_cases(root: Path) -> dict[str, tuple[Path, str]]:
    """case -> (source folder, what the one line must say)."""
    deep = "[" * 100_000 + "]" * 100_000
    nested = json.loads("[" * 100 + "]" * 100)  # parses, but deeper than limits.MAX_DEPTH
    return {
        "superscript step": (dump(root / "sup", {"².jsonl": two_good_lines()}), "².jsonl: the step in the file name must be ASCII digits"),
        "arabic-indic step": (dump(root / "arab", {"٣.jsonl": two_good_lines()}), "must be ASCII digits"),
        "step 10^20": (dump(root / "huge", {"1" + "0" * 20 + ".jsonl": two_good_lines()}), "is larger than 99999999"),
        "12-digit step": (dump(root / "wide", {"100000000000.jsonl": two_good_lines()}), "is larger than 99999999"),
        "duplicate steps": (dump(root / "dup", {"1.jsonl": two_good_lines(), "01.jsonl": two_good_lines()}),
                            "step 1 is also"),
        "score Infinity": (dump(root / "inf", {"1.jsonl": good_line() + "\n" + '{"input": "q", "output": "a", "score": Infinity}\n'}),
                           "1.jsonl:2: expected a JSON object with input (text), output (text) and score (number); Infinity is not a finite number"),
        "score NaN": (dump(root / "nan", {"1.jsonl": '{"input": "q", "output": "a", "score": NaN}\n'}), "1.jsonl:1: "),
        "score 1e400": (dump(root / "e400", {"1.jsonl": '{"input": "q", "output": "a", "score": 1e400}\n'}),
                        "1.jsonl:1: score must be a finite number"),
        "score 10^400": (dump(root / "int400", {"1.jsonl": '{"input": "q", "output": "a", "score": 1' + "0" * 400 + "}\n"}),
                         "1.jsonl:1: score must be at most 1e+12 in size"),
        "extra -Infinity": (dump(root / "extra", {"1.jsonl": '{"input": "q", "output": "a", "score": 1, "acc": -Infinity}\n'}),
                            "1.jsonl:1: "),
        "nested 100000": (dump(root / "deep", {"1.jsonl": good_line() + "\n" + '{"input": "q", "output": "a", "score": 1, "x": ' + deep + "}\n"}),
                          "1.jsonl:2: JSON nested deeper than 64 levels"),
        "nested 100": (dump(root / "deep100", {"1.jsonl": good_line(x=nested) + "\n"}), "1.jsonl:1: JSON nested deeper"),
        "10,000 extra keys": (dump(root / "keys", {"1.jsonl": good_line(**{f"k{i}": i for i in range(10_000)}) + "\n"}),
                              "1.jsonl:1: at most 64 extra keys"),
        "long completion": (dump(root / "long", {"1.jsonl": good_line() + "\n" + json.dumps(
            {"input": "q", "output": "x" * (limits.MAX_TEXT_CHARS + 1), "score": 1}) + "\n"}),
            "1.jsonl:2: output has 1,000,001 characters; at most 1,000,000 are imported"),
        "long line": (dump(root / "line", {"1.jsonl": json.dumps(
            {"input": "q", "output": "a", "score": 1, "pad": "y" * (limits.MAX_LINE_BYTES + 10)}) + "\n"}),
            "1.jsonl:1: the line is longer than 8 MiB"),
        "folder as step": (dump(root / "dirstep", {"2.jsonl": two_good_lines()}), "1.jsonl: expected a regular file"),
    }


def test_hostile_verl_dumps_get_one_line_and_leave_nothing(tmp_path, capsys):
    cases = verl_cases(tmp_path / "src")
    (cases["folder as step"][0] / "1.jsonl").mkdir()
    runs = tmp_path / "runs"
    runs.mkdir()
    for case, (source, expected) in cases.items():
        assert cli.main([str(source), "--name", "x", "--runs-dir", str(runs)]) == 2, case
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: ") and expected in err, (case, err[:300])
        assert list(runs.iterdir()) == [], case  # no run, no .tmp-import-* folder


def test_a_fifo_step_file_is_refused_not_waited_on(tmp_path):
    """A real subprocess: before, the import blocked on open() for good (and left its temporary folder)."""
    verl = dump(tmp_path / "verl", {"1.jsonl": two_good_lines()})
    os.mkfifo(verl / "2.jsonl")
    trl = tmp_path / "trl" / "completions"
    trl.mkdir(parents=True)
    os.mkfifo(trl / "completions_00001.parquet")
    runs = tmp_path / "runs"
    for source, expected in ((verl, "2.jsonl: expected a regular file"),
                             (trl.parent, "completions_00001.parquet: expected a regular file")):
        done = subprocess.run([sys.executable, "-m", "grpo_lab.rundir.import", str(source), "--name", "x",
                               "--runs-dir", str(runs)], capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and expected in done.stderr, done.stderr
        assert not runs.exists() or list(runs.iterdir()) == []


def test_hostile_trl_folders_get_one_line(tmp_path, capsys):
    cases = {
        "advantage inf": (trl_folder(tmp_path / "a", advantage=[float("inf"), 0.0]),
                          "completions_00001.parquet: row 0: advantage must be a finite number"),
        "reward 1e400": (trl_folder(tmp_path / "b", correct=[1e300 * 1e300, 0.0]),
                         "row 0: correct must be a finite number"),
        "advantage a list": (trl_folder(tmp_path / "h", advantage=[[1.0, 2.0], [0.0]]),
                             "row 0: advantage must be a number; got list"),
        "long completion": (trl_folder(tmp_path / "c", completion=["x" * (limits.MAX_TEXT_CHARS + 1), "b"]),
                            "row 0: completion has 1,000,001 characters"),
    }
    wide = trl_folder(tmp_path / "d")
    os.rename(wide / "completions" / "completions_00001.parquet", wide / "completions" / "completions_123456789012.parquet")
    cases["12-digit step"] = (wide, "is larger than 99999999")
    dup = trl_folder(tmp_path / "e")
    (dup / "completions" / "completions_1.parquet").write_bytes((dup / "completions" / "completions_00001.parquet").read_bytes())
    cases["duplicate steps"] = (dup, "step 1 is also")
    deep = trl_folder(tmp_path / "f")
    (deep / "trainer_state.json").write_text('{"log_history": ' + "[" * 100_000 + "]" * 100_000 + "}")
    cases["deep trainer_state"] = (deep, "trainer_state.json: JSON nested deeper")
    far = trl_folder(tmp_path / "g")
    (far / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 10**20, "loss": 1.0}]}))
    cases["step 10^20 in log_history"] = (far, "log_history[0]: step 100000000000000000000 is outside")
    runs = tmp_path / "runs"
    runs.mkdir()
    for case, (source, expected) in cases.items():
        assert cli.main([str(source), "--name", "x", "--runs-dir", str(runs)]) == 2, case
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected in err, (case, err[:300])
        assert list(runs.iterdir()) == [], case


def memo_expansion(levels: int = 12, width: int = 10) -> bytes:
    """A pickled {"reward_weights": L12} where L0 = "lol" and each L(k) is a list of `width` memo
    references to L(k-1): about 300 bytes that hold 10^12 values once walked ("billion laughs")."""
    import pickle

    value: object = "lol"
    for _ in range(levels):
        value = [value] * width
    return pickle.dumps({"reward_weights": value}, protocol=2)


def test_a_memo_expansion_training_args_is_refused_in_one_line(tmp_path):
    """A real subprocess: before, turning the options into plain values never finished (killed at 120 s)."""
    import zipfile

    source = trl_folder(tmp_path / "laughs")
    with zipfile.ZipFile(source / "training_args.bin", "w") as archive:
        archive.writestr("training_args/data.pkl", memo_expansion())
    runs = tmp_path / "runs"
    done = subprocess.run([sys.executable, "-m", "grpo_lab.rundir.import", str(source), "--name", "x",
                           "--runs-dir", str(runs)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr[-500:]
    assert ("training_args.bin: expected TRL's training_args.bin (a saved GRPOConfig); the pickle would build "
            "more than 262,144 values and characters") in done.stderr
    assert not runs.exists() or list(runs.iterdir()) == []


def test_the_widest_step_a_run_directory_holds_imports_and_reads_back(tmp_path):
    source = dump(tmp_path / "verl", {"99999999.jsonl": two_good_lines(), "7.jsonl": two_good_lines()})
    assert cli.main([str(source), "--name", "wide", "--runs-dir", str(tmp_path / "runs")]) == 0
    assert sorted(read_table(tmp_path / "runs" / "wide", "samples")["step"].unique()) == [7, 99999999]
    assert read_run(tmp_path / "runs", "wide").step == 99999999


def test_the_temporary_folder_goes_on_any_exit(tmp_path):
    for exc in (KeyboardInterrupt, SystemExit(143), RuntimeError("boom")):
        def fill(paths: RunPaths, exc=exc):
            (paths.root / "half").write_text("written")
            raise exc
        with pytest.raises(BaseException):
            build.build_run(tmp_path, "x", fill)
        assert list(tmp_path.iterdir()) == [], exc


def test_sigterm_during_an_import_removes_the_temporary_folder(tmp_path):
    """A real subprocess killed mid-import: its .tmp-import-* folder is gone once it has exited."""
    source = tmp_path / "verl"
    source.mkdir()
    lines = "".join(good_line(score=float(k % 2), uid=f"u{k // 4}") + "\n" for k in range(64))
    for step in range(1, 3001):
        (source / f"{step}.jsonl").write_text(lines)
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "grpo_lab.rundir.import", str(source), "--name", "x",
                             "--runs-dir", str(runs)], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (runs.exists() and list(runs.glob(".tmp-import-*"))):
        time.sleep(0.05)
    assert list(runs.glob(".tmp-import-*")), "the import never started writing"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert list(runs.iterdir()) == []
