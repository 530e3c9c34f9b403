"""A sweep's counts in a real browser: a sweep with a run or launch in every state (queued, launching,
starting, running, failed, stopped, failed to start, two finished) reads one count on Runs, its row
beside a table of as many runs, and the same line on Compare's ?sweep= page, in English and Chinese.

The runs are tests/dashboard/test_sweep_counts.py's, made for a server in another process: there the launching
one's trainer is a monkeypatched is_trainer_of, here a live stub process the server's /proc check takes
for it; the queue's key folder and slot limit go to the server through its environment. Runs written
with the run-directory writer; no trainer starts."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest
from playwright.sync_api import expect

from browser_helpers import assert_page_whole, grid_rows, locale, streamlit_server, to_chinese, wait_idle
from grpo_lab.launching import launch_queue, launch_records, process_control
from grpo_lab.launching.keys import KEY_DIR_ENV, NONCE_ENV, entry_id, sign_entry
from queue_helpers import DIED, EXPECTED, LAUNCHING, set_state
from trainer_helpers import wait_until
from variants_helpers import write_run

QUEUED = "s-b_1-s0"
MEMBERS = {*(f"s-a_1-s{seed}" for seed in range(6)), QUEUED, LAUNCHING, DIED}  # "lone" is of no sweep
ZH_RUNS = "运行列表"  # the Runs page's heading in Chinese: to_chinese waits for it


def stub_trainer(folder, runs, name: str) -> subprocess.Popen:
    """A live process whose /proc command line is `python -m grpo_lab.trainer --name NAME ... --runs-dir
    RUNS` (what process_control.is_trainer_of checks), that trains nothing: it runs in `folder`, where a stub
    package of that name waits, and for `-m` the working directory comes first on sys.path."""
    (folder / "grpo_lab" / "trainer").mkdir(parents=True)
    (folder / "grpo_lab" / "__init__.py").write_text("")
    (folder / "grpo_lab" / "trainer" / "__init__.py").write_text("")
    (folder / "grpo_lab" / "trainer" / "__main__.py").write_text("import time\ntime.sleep(3600)\n")
    env = {k: v for k, v in os.environ.items() if k != NONCE_ENV}  # no nonce: judged by its runs folder
    return subprocess.Popen([sys.executable, "-m", "grpo_lab.trainer", "--name", name, "--sweep", "s",
                             "--variant", "b=1", "--runs-dir", str(runs)], cwd=folder, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def write_launch(runs, name: str, pid: int, command: list[str]) -> None:
    """A started launch's record (a command, no argv) whose trainer has not made its run folder yet."""
    (runs / launch_records.LAUNCH_DIR / f"{name}.json").write_text(
        json.dumps({"name": name, "pid": pid, "command": command, "processes": 1, "started_at": time.time()}))


@pytest.fixture(scope="module")
def sweep_server(tmp_path_factory):
    """A dashboard over sweep s with one run or launch in each state (two finished) and a run of no sweep."""
    base = tmp_path_factory.mktemp("sweep-counts")
    runs = base / "runs"
    runs.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        # the server inherits these: it checks the queued entry with the key it was signed with here, and
        # with one slot, held by the running runs, that entry waits instead of starting a trainer
        mp.setenv(KEY_DIR_ENV, str(base / "keys"))
        mp.setenv(launch_queue.MAX_RUNS_ENV, "1")
        for seed, state in enumerate(["finished", "finished", "starting", "running", "failed", "stopped"]):
            write_run(runs, f"s-a_1-s{seed}", "s", "a=1", seed, 0.5, steps=4)
            set_state(runs, f"s-a_1-s{seed}", state)  # pid: this test process, alive while the server reads it
        write_run(runs, "lone", "", "", 0, 0.5, steps=4)
        (runs / launch_records.LAUNCH_DIR).mkdir()
        entry = {"name": QUEUED, "queued": True, "argv": ["--name", QUEUED, "--sweep", "s", "--variant", "b=1"],
                 "processes": 1, "queued_at": time.time(), "id": entry_id()}
        (runs / launch_records.LAUNCH_DIR / f"{QUEUED}.json").write_text(
            json.dumps({**entry, "signature": sign_entry(runs, entry)}))
        trainer = stub_trainer(base / "stub", runs, LAUNCHING)
        try:
            write_launch(runs, LAUNCHING, trainer.pid, trainer.args)
            write_launch(runs, DIED, 4_000_002, ["python", "-m", "grpo_lab.trainer", "--name", DIED, "--sweep", "s",
                                                 "--variant", "b=1", "--runs-dir", str(runs)])  # no such process
            # the server's check, made here first. Popen returns once exec has begun, and the kernel sets
            # the new /proc command line a moment later: a check at once can read it empty (seen in CI)
            wait_until(lambda: process_control.is_trainer_of(trainer.pid, LAUNCHING, runs), 30,
                       "the stub trainer to look like one", alive=trainer)
            with streamlit_server(runs) as url:
                yield url
        finally:
            trainer.kill()
            trainer.wait()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_runs_and_compare_show_one_count_of_every_state_beside_as_many_runs(sweep_server, page, lang):
    text = locale(lang)
    page.goto(sweep_server)  # Runs is the default page: its address is /
    wait_idle(page)
    if lang == "zh":
        to_chinese(page, ZH_RUNS)

    # the sweep's row reads the count, each state once, exactly
    row = page.get_by_text(EXPECTED[lang], exact=True)
    expect(row).to_be_visible()
    assert_page_whole(page, chinese=lang == "zh")

    # its per-variant table adds up to the row's total
    row.click()
    sweep = page.get_by_test_id("stExpander").filter(has_text=EXPECTED[lang])
    head, rows = grid_rows(sweep.get_by_test_id("stDataFrame"), text["sweeps.col_variant"])
    states = [i for i, h in enumerate(head) if h not in (text["sweeps.col_variant"], text["sweeps.col_steps"])]
    assert sum(int(r[i]) for r in rows for i in states) == len(MEMBERS), (head, rows)

    # the Runs table lists as many runs of the sweep as the row counts, and the run of no sweep
    # (the whole list: "List only its runs" sets a filter that a refresh running at that moment can undo)
    table = page.get_by_test_id("stDataFrame").filter(has=page.locator("thead th").get_by_text(text["col.name"],
                                                                                              exact=True))
    expect(table.locator("tbody tr")).to_have_count(len(MEMBERS) + 1)
    head, rows = grid_rows(table, text["col.name"])
    assert {r[head.index(text["col.name"])] for r in rows} == MEMBERS | {"lone"}, rows

    # Compare's ?sweep=s page, opened by the row's link, shows the same line
    page.get_by_text(text["sweeps.compare"], exact=True).click()
    # the language rides in the address (?lang=zh), English's is none
    expect(page).to_have_url(re.compile(r"/compare\?sweep=s" + ("&lang=zh" if lang == "zh" else "") + "$"))
    expect(page.get_by_role("heading", name=text["variants.sweep_heading"].format(sweep="s"))).to_be_visible()
    expect(page.get_by_test_id("stCaptionContainer").get_by_text(EXPECTED[lang], exact=True)).to_be_visible()
    wait_idle(page)
    assert_page_whole(page, chinese=lang == "zh")
