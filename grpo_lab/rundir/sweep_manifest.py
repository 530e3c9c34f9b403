"""`<runs>/.sweeps/<sweep>.json`: what each run of a sweep was planned as (docs/run-directory.md, "Sweeps").

A run's config.json says which variant it belongs to, but config.json is a file anyone may edit: a run
whose beta was changed by hand would be resumed and still counted under its old variant. The manifest,
written once when the sweep is queued, keeps every run's variant, seed and effective options, so a
resume can refuse a run whose config.json no longer matches its variant, naming the keys that differ.

>>> differing({"beta": 0.04, "lr": 1e-5, "seed": 1}, {"beta": 0.1, "lr": 1e-5, "seed": 1, "resume": True})
['beta']
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from grpo_lab.rundir import json_file
from grpo_lab.rundir.layout import SOURCES_KEY, valid_run_name, write_json_atomic

FOLDER = ".sweeps"  # starts with '.', so it can never be a run name
# set again by every start or resume, or where it came from: never a difference
NOT_COMPARED = (SOURCES_KEY, "runs_dir", "resume")


def path(runs_dir: str | Path, sweep: str) -> Path:
    return Path(runs_dir) / FOLDER / f"{sweep}.json"


def write(runs_dir: str | Path, sweep: str, runs: dict[str, dict[str, Any]], new: bool) -> None:
    """Record the sweep's runs: {run name: {"variant", "seed", "options"}} (options: the run's effective
    values, as its config.json will hold them). A new sweep replaces a manifest left by a deleted one of
    its name; a sweep that is resumed (`new` False) keeps its first manifest."""
    if not valid_run_name(sweep) or (not new and path(runs_dir, sweep).exists()):
        return
    write_json_atomic(path(runs_dir, sweep), {"sweep": sweep, "created_at": time.time(), "runs": runs})


def planned(runs_dir: str | Path, sweep: Any, run: str) -> tuple[dict[str, Any] | None, str | None]:
    """(run's entry {"variant", "seed", "options"}, None); (None, None) when the sweep has no manifest
    (one queued before manifests existed) or does not list the run; (None, why) when it cannot be read."""
    if not isinstance(sweep, str) or not valid_run_name(sweep):
        return None, None
    data, problem = json_file.read(path(runs_dir, sweep))
    if data is None:
        return None, problem and f"{FOLDER}/{problem}"
    entry = (data.get("runs") or {}).get(run) if isinstance(data.get("runs"), dict) else None
    if entry is not None and not (isinstance(entry, dict) and isinstance(entry.get("options"), dict)):
        return None, f"{FOLDER}/{sweep}.json: the entry of {run} is not a mapping with options"
    return entry, None


def differing(options: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The option names whose value in `config` (a config.json) is not the planned one, sorted;
    options only one side has count too (an option added by hand, or one deleted)."""
    keys = (set(options) | set(config)) - set(NOT_COMPARED)
    return sorted(k for k in keys if _same(options.get(k)) != _same(config.get(k)))


def _same(value: Any) -> str:
    """A value as JSON text, so a tuple and a list (and 1 and 1.0, as config.json gives them back) compare equal."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return json.dumps(value, sort_keys=True, default=str)
