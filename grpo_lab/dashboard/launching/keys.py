"""The dashboard's own secret, and what it signs: launch-queue entries and launched trainers.

The key (key_dir()/queue.key) lives outside every runs folder, so someone who can write a runs
folder (a shared folder, a run unpacked from elsewhere) cannot make an entry this dashboard starts,
nor pass a process off as the trainer of a run.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

KEY_DIR_ENV = "GRPO_LAB_KEY_DIR"  # where queue.key lives (default: $XDG_CONFIG_HOME/grpo-lab)
NONCE_ENV = "GRPO_LAB_RUN_NONCE"  # in a launched trainer's environment: which run folder it trains


def key_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(os.environ.get(KEY_DIR_ENV) or Path(base) / "grpo-lab")


def queue_key() -> bytes:
    """This user's secret (key_dir()/queue.key, 0600, made on first use): outside every runs folder,
    so someone who can only write a runs folder cannot sign for this dashboard."""
    path = key_dir() / "queue.key"
    try:
        return bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".queue.key.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with open(fd, "w") as fh:
        fh.write(secrets.token_hex(32))
    try:
        os.link(tmp, path)  # atomic: two processes making it at once agree on one key
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    try:
        return bytes.fromhex(path.read_text().strip())
    except ValueError:
        raise ValueError(f"{path}: not a grpo-lab key (hex digits); remove it and a new one is made") from None


def _mac(purpose: str, runs_dir: Path, payload: Any) -> str:
    message = json.dumps([purpose, str(Path(runs_dir).resolve()), payload], sort_keys=True, default=str)
    return hmac.new(queue_key(), message.encode(), hashlib.sha256).hexdigest()


def sign_entry(runs_dir: Path, entry: dict[str, Any]) -> str:
    return _mac("queue", runs_dir, {k: v for k, v in entry.items() if k != "signature"})


def entry_signed(runs_dir: Path, record: dict[str, Any]) -> bool:
    signature = record.get("signature")
    return isinstance(signature, str) and hmac.compare_digest(signature, sign_entry(runs_dir, record))


def run_nonce(runs_dir: Path, name: str) -> str:
    """What a trainer launched for runs_dir/name finds in its environment (NONCE_ENV): bound to
    the resolved folder and keyed, so neither a decoy nor another folder's trainer has it."""
    return _mac("run", runs_dir, name)
