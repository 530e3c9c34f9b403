"""The installable package: a wheel with one top-level name, and console commands that work from
any folder without the checkout (installed with `pip install --target`, the repository off the path)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
import zipfile
from pathlib import Path

import pytest

from trainer_helpers import ROOT

pytestmark = pytest.mark.timeout(400)
COMMANDS = tuple(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"])


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """The wheel built from this checkout, and a folder it is installed into (no dependencies:
    those come from this environment's site-packages, which never hold the checkout)."""
    out = tmp_path_factory.mktemp("package")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(out / "dist"), str(ROOT)], check=True, capture_output=True, timeout=300)
    wheel = next((out / "dist").glob("grpo_lab-*.whl"))
    target = out / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    work = out / "elsewhere"  # a folder with no checkout in it or above it
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GRPO_LAB_RUNS_DIR")}
    env["PYTHONPATH"] = str(target)
    return {"wheel": wheel, "bin": target / "bin", "work": work, "env": env, "target": target}


def test_the_wheel_holds_one_top_level_name_its_data_and_its_commands(installed):
    names = zipfile.ZipFile(installed["wheel"]).namelist()
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"grpo_lab"}
    for data in ("grpo_lab/configs/smollm2-word-problems.yaml", "grpo_lab/dashboard/locales/zh.yaml",
                 "grpo_lab/rewards/_sandbox_child.py", "grpo_lab/dashboard/app.py"):
        assert data in names
    assert not any(n.startswith(("tests/", "bench/")) for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(installed["wheel"]).read(entry_points).decode()
    for command in COMMANDS:
        assert command in text


def test_every_command_but_the_dashboard_answers_help(installed):
    for command in (c for c in COMMANDS if c != "grpo-lab-dashboard"):
        done = subprocess.run([str(installed["bin"] / command), "--help"], capture_output=True, text=True,
                              timeout=120, cwd=installed["work"], env=installed["env"])
        assert done.returncode == 0 and "usage" in done.stdout.lower(), (command, done.stderr[-500:])


def test_grpo_lab_train_from_another_folder_trains_and_writes_runs_there(installed):
    run = subprocess.run([str(installed["bin"] / "grpo-lab-train"), "--name", "pkg", "--max-steps", "2",
                          "--prompts-per-step", "2", "--group-size", "2", "--sft-steps", "1", "--flush-seconds", "0"],
                         cwd=installed["work"], env=installed["env"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    status = json.loads((installed["work"] / "runs" / "pkg" / "status.json").read_text())
    assert status["state"] == "finished" and status["step"] == 2
    # the code that ran is the installed copy, not the checkout
    where = subprocess.run([sys.executable, "-c", "import grpo_lab, sys; print(grpo_lab.__file__); "
                            "print(any(m in sys.modules for m in ('trainer', 'rewards', 'rundir', 'dashboard')))"],
                           cwd=installed["work"], env=installed["env"], capture_output=True, text=True, check=True)
    file, generic = where.stdout.split()
    assert Path(file).is_relative_to(installed["target"]) and generic == "False"


def test_grpo_lab_dashboard_serves_on_localhost_from_another_folder(installed):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([str(installed["bin"] / "grpo-lab-dashboard"), "--server.port", str(port)],
                            cwd=installed["work"], env=installed["env"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline, health = time.monotonic() + 90, ""
        while time.monotonic() < deadline and health != "ok":
            try:
                health = urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read().decode()
            except OSError:
                assert proc.poll() is None, proc.stdout.read()
                time.sleep(0.5)
        assert health == "ok"
        import psutil

        listening = [c.laddr.ip for c in psutil.Process(proc.pid).net_connections("inet")
                     if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
        assert listening and all(ip in ("127.0.0.1", "::1") for ip in listening), listening
    finally:
        proc.terminate()
        proc.wait(timeout=30)
