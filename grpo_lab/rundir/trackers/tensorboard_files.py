"""TensorBoard: event files in the run folder's tensorboard/ (written with torch.utils.tensorboard, read
with TensorBoard's own EventAccumulator). Both need the tensorboard package (requirements-trackers.txt).

A scalar is stored as a 32-bit float (TensorBoard's simple_value): read back it equals the run folder's
float64 value rounded to float32. The config is one text summary, `config`, holding its JSON; TensorBoard
keeps no tables, so the completions stay in the run folder's samples table.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from grpo_lab.rundir.trackers.logged import Logged

FOLDER = "tensorboard"  # inside the run folder
CONFIG_TAG = "config"


class TensorBoardSink:
    def __init__(self, folder: Path, values: dict[str, Any]):
        from torch.utils.tensorboard import SummaryWriter  # noqa: PLC0415 - ImportError without tensorboard

        self.writer = SummaryWriter(log_dir=str(folder), flush_secs=10)
        self.writer.add_text(CONFIG_TAG, json.dumps(values, default=str, sort_keys=True), global_step=0)

    def scalars(self, step: int, time: float, values: dict[str, float]) -> None:
        when = None if math.isnan(time) else time
        for name, value in values.items():
            self.writer.add_scalar(name, value, global_step=step, walltime=when)

    def table(self, step: int, columns: dict[str, list]) -> None:
        pass  # TensorBoard has no tables

    def close(self) -> None:
        self.writer.close()


def open_sink(run_dir: Path, run_name: str, config: dict[str, Any]) -> TensorBoardSink:
    return TensorBoardSink(run_dir / FOLDER, config)


def read(folder: Path) -> Logged:
    """Every scalar of the event files in `folder` (the last event of a step wins, as TensorBoard shows
    it), each step's latest wall time, and the config where the lab wrote one."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: PLC0415

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})  # 0: keep every event
    acc.Reload()
    out = Logged()
    tags = acc.Tags()
    for tag in tags.get("scalars", []):
        for event in acc.Scalars(tag):
            out.add(event.step, tag, float(event.value))
            out.times[event.step] = max(out.times.get(event.step, 0.0), event.wall_time)
    from tensorboard.util import tensor_util  # noqa: PLC0415

    for tag in tags.get("tensors", []):  # TF2's tf.summary.scalar and new-style writers: scalars as tensors
        if acc.SummaryMetadata(tag).plugin_data.plugin_name == "scalars":
            for event in acc.Tensors(tag):
                out.add(event.step, tag, float(tensor_util.make_ndarray(event.tensor_proto).item()))
                out.times[event.step] = max(out.times.get(event.step, 0.0), event.wall_time)
    text = f"{CONFIG_TAG}/text_summary"
    if text in tags.get("tensors", []):
        value = tensor_util.make_ndarray(acc.Tensors(text)[-1].tensor_proto).item()
        out.config = json.loads(value.decode() if isinstance(value, bytes) else value)
    return out
