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

from grpo_lab import project_dir
from grpo_lab.launching import allowed

KEY_DIR_ENV = "GRPO_LAB_KEY_DIR"  # where queue.key lives (default: $XDG_CONFIG_HOME/grpo-lab)
NONCE_ENV = "GRPO_LAB_RUN_NONCE"  # in a launched trainer's environment: which run folder it trains


class KeyDirError(ValueError):
    """The key folder lies where others may read or write it; the message is one line."""


def key_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(os.environ.get(KEY_DIR_ENV) or Path(base) / "grpo-lab")


def check_key_dir(runs_dir: Path) -> None:
    """KeyDirError (one line) when the key folder lies inside the runs folder or a data folder
    (allowed.data_dirs): whoever can write a runs folder, or read what the launch form may read, could
    then sign queue entries. The default folder (under ~/.config) is not held against the project
    folder, which is the current folder for an installed package and may be the home folder."""
    key = key_dir().expanduser().resolve()
    runs = Path(runs_dir).resolve()
    folders = [(runs, "the runs folder")] + [(f, "a data folder") for f in allowed.data_dirs(runs_dir) if f != runs]
    for folder, kind in folders:
        default_in_project = not os.environ.get(KEY_DIR_ENV) and folder == project_dir().resolve()
        if key.is_relative_to(folder) and not default_in_project:
            raise KeyDirError(f"{KEY_DIR_ENV}: {key} lies inside {kind} {folder}, where others may read or plant "
                              "files; keep the key folder outside every runs and data folder")


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
    check_key_dir(runs_dir)  # never sign, nor trust a signature, with a key others may hold
    message = json.dumps([purpose, str(Path(runs_dir).resolve()), payload], sort_keys=True, default=str)
    return hmac.new(queue_key(), message.encode(), hashlib.sha256).hexdigest()


def sign_entry(runs_dir: Path, entry: dict[str, Any]) -> str:
    return _mac("queue", runs_dir, {k: v for k, v in entry.items() if k != "signature"})


def entry_signed(runs_dir: Path, record: dict[str, Any]) -> bool:
    signature = record.get("signature")
    return isinstance(signature, str) and hmac.compare_digest(signature, sign_entry(runs_dir, record))


def key_id(runs_dir: Path) -> str:
    """A public name for this dashboard's key over this runs folder (a MAC of nothing: it tells nothing
    of the key), written into each queue entry it signs. Two dashboards may serve one runs folder with
    different key folders (GRPO_LAB_KEY_DIR): each then knows the other's entries for what they are."""
    return _mac("key id", runs_dir, None)[:16]


def entry_signer(runs_dir: Path, record: dict[str, Any]) -> str:
    """Who signed a queue entry: "this" dashboard (its key, a valid signature); "tampered" (it names
    this dashboard's key, but the signature no longer matches: changed since it was signed); "other"
    (another key, or none: another dashboard's queue over the same folder, or a planted file). An
    "other" entry is never started here, nor refused: it waits for the dashboard that signed it."""
    if entry_signed(runs_dir, record):
        return "this"
    return "tampered" if record.get("key") == key_id(runs_dir) else "other"


def run_nonce(runs_dir: Path, name: str) -> str:
    """What a trainer launched for runs_dir/name finds in its environment (NONCE_ENV): bound to
    the resolved folder and keyed, so neither a decoy nor another folder's trainer has it."""
    return _mac("run", runs_dir, name)


# --- queue entries are used once, and expire ------------------------------------------------------
# A signed entry copied aside and put back after its run was deleted is still signed: each entry
# carries a random id (signed with it), and the ids of started entries are kept in the key folder,
# outside every runs folder, so a copy is refused. Kept as long as an entry may wait in the queue:
# an older entry is refused for its age, so its id need not be remembered longer.
MAX_ENTRY_AGE_S = 7 * 24 * 3600  # a week: a queue waits for a free slot, not for days on end
USED_FILE = "used-queue-entries"


def entry_id() -> str:
    return secrets.token_hex(16)


# An id's state: "marked" before its trainer starts, "started" once it has, "retried" when an entry
# marked but never started (the dashboard killed in between) is offered again, which happens once. A line
# of an older version ("WHEN ID") is a started entry.
USED_STATES = ("marked", "retried", "started")


def _used() -> dict[str, tuple[float, str]]:
    """id -> (when last marked, its state): "WHEN ID [STATE]" lines."""
    try:
        lines = (key_dir() / USED_FILE).read_text().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        when, _, rest = line.partition(" ")
        ident, _, state = rest.partition(" ")
        try:
            out[ident] = (float(when), state if state in USED_STATES else "started")
        except ValueError:
            continue
    return out


def entry_used(ident: Any) -> bool:
    return entry_state(ident) is not None


def entry_state(ident: Any) -> str | None:
    """None for an entry never marked, else its USED_STATES state."""
    found = _used().get(ident) if isinstance(ident, str) else None
    return None if found is None else found[1]


def mark_used(ident: str, now: float, state: str = "started") -> None:
    """Remember `ident` as `state`: "marked" before the trainer starts (a crash in between leaves it used,
    never started twice; offered again only when seen never to have started, and then once:
    launch_queue.replayed_or_expired), "started" after; ids older than MAX_ENTRY_AGE_S are dropped, their
    entries refused by age anyway."""
    path = key_dir() / USED_FILE
    kept = {i: v for i, v in _used().items() if now - v[0] <= MAX_ENTRY_AGE_S}
    kept[ident] = (now, state)
    tmp = path.with_name(f".{USED_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with open(fd, "w") as fh:
        fh.write("".join(f"{t} {i} {st}\n" for i, (t, st) in kept.items()))
    os.replace(tmp, path)
