"""wandb: offline by default (files under the run folder's wandb/, for `wandb sync` later), online where
the user set WANDB_MODE or WANDB_API_KEY. Read back from the offline run's own files.

The offline run's history is its transaction log, run-<id>.wandb: wandb's header (":W&B", a magic
number, a version: 7 bytes), then LevelDB's log format (32 KiB blocks of chunks: a 4-byte checksum, a
2-byte length, a 1-byte type: full, first, middle or last), each record one protobuf `Record` of wandb's
own schema (wandb.proto.wandb_internal_pb2). wandb 0.31 ships no Python reader of this file (its
DataStore and `wandb sync --view` are gone with the Go core), so the framing is read here and the
records with wandb's classes. The checksums (masked CRC-32C, not in the standard library) are not
checked: a torn last chunk ends the read. A completions table is a file the history points to.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

from grpo_lab.rundir.trackers.logged import Logged

PROJECT = "grpo-lab"  # WANDB_PROJECT overrides it, as for TRL
TABLE_KEY = "completions"  # TRL's key for its completions table
HEADER = 7  # ":W&B", magic (2 bytes), version (1 byte)
BLOCK = 32768
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def mode() -> str:
    """offline unless the user configured wandb: WANDB_MODE as given, online with a WANDB_API_KEY."""
    return os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")


class WandbSink:
    def __init__(self, run_dir: Path, run_name: str, config: dict[str, Any]):
        import wandb  # noqa: PLC0415 - ImportError without it

        self.wandb = wandb
        settings = wandb.Settings(silent=True, console="off", x_disable_stats=True, x_disable_machine_info=True)
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT") or PROJECT, name=run_name, dir=str(run_dir),
                              mode=mode(), reinit="create_new", config=config, settings=settings)

    def scalars(self, step: int, time: float, values: dict[str, float]) -> None:
        self.run.log(values, step=step)

    def table(self, step: int, columns: dict[str, list]) -> None:
        names = list(columns)
        rows = [list(r) for r in zip(*columns.values())]
        self.run.log({TABLE_KEY: self.wandb.Table(columns=names, data=rows)}, step=step)

    def close(self) -> None:
        self.run.finish()


def open_sink(run_dir: Path, run_name: str, config: dict[str, Any]) -> WandbSink:
    return WandbSink(run_dir, run_name, config)


def chunks(data: bytes):
    """The records' payloads of one transaction log (the module docstring's framing)."""
    if data[:4] != b":W&B":
        raise ValueError("not a wandb transaction log (no :W&B header)")
    pos, parts = HEADER, []
    while pos + 7 <= len(data):
        if BLOCK - pos % BLOCK < 7:  # a block's tail too short for a chunk header is padding
            pos += BLOCK - pos % BLOCK
            continue
        length, kind = struct.unpack_from("<HB", data, pos + 4)
        body = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if len(body) < length or kind not in (FULL, FIRST, MIDDLE, LAST):
            break  # a torn or empty tail: the run was still writing, or was killed
        if kind in (FULL, FIRST):
            parts = [body]
        else:
            parts.append(body)
        if kind in (FULL, LAST):
            yield b"".join(parts)


def log_file(folder: Path) -> Path:
    """The transaction log in `folder`: a run's own folder, or a wandb/ folder (its latest offline run)."""
    found = sorted(folder.glob("run-*.wandb")) or sorted(folder.glob("offline-run-*/run-*.wandb"))
    if not found:
        raise FileNotFoundError(f"{folder}: no wandb run (run-<id>.wandb) there")
    return found[-1]


def read(folder: Path) -> Logged:
    """The scalars, config and completions tables of an offline run (the latest in `folder`)."""
    from wandb.proto import wandb_internal_pb2 as pb  # noqa: PLC0415 - wandb's own record schema

    path = log_file(folder)
    out = Logged()
    for payload in chunks(path.read_bytes()):
        record = pb.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind in ("run", "config"):  # the config given to init is in the run record, later updates in config
            update = record.run.config.update if kind == "run" else record.config.update
            out.config = {**(out.config or {}), **{i.key: json.loads(i.value_json) for i in update}}
        elif kind == "history":
            history(record.history, path.parent, out)
    if out.config:  # wandb keeps its own entries (_wandb) and wraps each value as {"value": v}
        out.config = {k: v.get("value") if isinstance(v, dict) and "value" in v else v
                      for k, v in out.config.items() if k != "_wandb"}
    return out


def history(record, run_folder: Path, out: Logged) -> None:
    """One history row into `out`: its scalars, its time, a completions table (a dict logged under one
    key arrives as nested keys: the table's path among them)."""
    step = record.step.num
    nested: dict[str, dict[str, Any]] = {}
    for item in record.item:
        keys = [item.key] if item.key else list(item.nested_key)
        value = json.loads(item.value_json)  # wandb writes NaN and Infinity as JSON's extensions do
        if len(keys) > 1:
            nested.setdefault(keys[0], {})[keys[1]] = value
        elif keys[0] == "_timestamp":
            out.times[step] = float(value)
        elif not keys[0].startswith("_") and isinstance(value, (int, float)) and not isinstance(value, bool):
            out.add(step, keys[0], float(value))
    table = nested.get(TABLE_KEY, {})
    if table.get("_type") == "table-file" and table.get("path"):
        data = json.loads((run_folder / "files" / table["path"]).read_text())
        out.tables[step] = [dict(zip(data["columns"], row)) for row in data["data"]]
