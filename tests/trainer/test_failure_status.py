"""A failure's status.json names the last step recorded, whenever in the loop it strikes: the status never goes
back. (A process killed during step 3's closing collective reached rank 0 while the loop still named step 3;
the failure wrote step 2 over a status that had said 3.)"""

from __future__ import annotations

import json
import logging
import time
from types import SimpleNamespace

from grpo_lab.rundir.layout import RunPaths
from grpo_lab.rundir.status import StatusFile
from grpo_lab.trainer.distributed import Dist
from grpo_lab.trainer.doctor import Doctor
from grpo_lab.trainer.run import Progress, record_failure


class Rows:
    flushed = 0

    def flush(self) -> None:
        self.flushed += 1


def failed_status(tmp_path, *, step: int, done: int) -> dict:
    paths = RunPaths(tmp_path)
    status = StatusFile(paths.status, name="r")
    status.update(state="running", step=done)
    doctor = Doctor(lr=1e-5, max_grad_norm=1.0, pretrained=False, vocab_size=10, trained_params=1)
    run = Progress(step=step, done=done, start=time.time(), doctor=doctor, findings={})
    comps = SimpleNamespace(dist=Dist(), log=logging.getLogger("test-failure-status"), writer=Rows())
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        assert record_failure(comps, paths, status, run, exc) == 1
    assert comps.writer.flushed == 1  # the rows written so far are kept
    return json.loads(paths.status.read_text())


def test_a_failure_after_a_steps_record_keeps_that_step(tmp_path):
    seen = failed_status(tmp_path, step=3, done=3)  # step 3 recorded; its closing collective failed
    assert (seen["state"], seen["step"]) == ("failed", 3)
    assert seen["error"] == "RuntimeError: boom"


def test_a_failure_inside_a_step_names_the_step_before(tmp_path):
    seen = failed_status(tmp_path, step=4, done=3)  # step 4 under way, not recorded
    assert (seen["state"], seen["step"]) == ("failed", 3)
