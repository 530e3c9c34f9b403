"""A launch queue to test against: a runs folder where nothing may start, entries planted as a dashboard (or
someone else) would write them, and a sweep with a run or launch in every state."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from grpo_lab.launching import launch_records, pending_launches
from grpo_lab.launching.keys import KEY_DIR_ENV, entry_id, key_id, sign_entry
from grpo_lab.rundir.layout import write_json_atomic

LAUNCHING, DIED = "s-b_1-s1", "s-b_1-s2"
EXPECTED = {
    "en": "Sweep s: 2 of 9 runs finished · 1 queued · 1 launching · 1 starting · 1 running · 1 failed · 1 stopped"
          " · 1 failed to start",
    "zh": "扫描 s：共 9 个运行，2 个已完成 · 1 个排队中 · 1 个正在启动 · 1 个准备中 · 1 个运行中 · 1 个失败 · 1 个已停止"
          " · 1 个启动失败",
}


@pytest.fixture
def runs(tmp_path, monkeypatch):
    """A runs folder, a key folder outside it, no reward modules allowed, and no process may start."""
    monkeypatch.setenv(KEY_DIR_ENV, str(tmp_path / "keys"))
    monkeypatch.delenv("GRPO_LAB_REWARD_MODULES", raising=False)
    monkeypatch.delenv("GRPO_LAB_DATA_DIRS", raising=False)

    def no_process(*args, **kwargs):
        raise AssertionError(f"a process was started: {args[0] if args else kwargs}")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    folder = tmp_path / "runs"
    (folder / launch_records.LAUNCH_DIR).mkdir(parents=True)
    return folder


def plant(runs, name, argv, sign=False, **extra):
    entry = {"name": name, "queued": True, "argv": argv, "processes": 1, "queued_at": time.time(),
             "id": entry_id(), **extra}
    if sign:  # as launch_queue.enqueue signs: naming this dashboard's key
        entry["key"] = key_id(runs)
        entry["signature"] = sign_entry(runs, entry)
    write_json_atomic(runs / launch_records.LAUNCH_DIR / f"{name}.json", entry)
    return entry


def refused(runs) -> dict[str, str]:
    return {p.name: p.refused for p in pending_launches.pending(runs) if p.refused}


def set_state(runs, name: str, state: str) -> None:
    status = json.loads((runs / name / "status.json").read_text())
    (runs / name / "status.json").write_text(json.dumps({**status, "state": state, "pid": os.getpid()}))
