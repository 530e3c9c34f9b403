"""Launch-form presets: the built-in demo, plus one per config file in grpo_lab/configs/.

A preset is a set of trainer options; the form starts from them and the user edits the rest.
Dropping a YAML file into grpo_lab/configs/ adds a preset: its first comment line is the label.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from grpo_lab import CONFIGS

DEMO = "Built-in demo: tiny model, single-digit addition (about a minute on a CPU)"


def _label(path: Path) -> str:
    first = path.read_text(encoding="utf-8").splitlines()[:1]
    return first[0].lstrip("#").strip() if first and first[0].startswith("#") else path.stem


def presets(folder: Path = CONFIGS) -> dict[str, dict[str, Any]]:
    """{label: trainer options}, the demo first; a file that does not parse becomes an entry
    whose `error` says why, so one broken file never hides the others. Read again only when a
    file changed (the form is drawn at every rerun of the Runs page). Treat as read-only."""
    files = []
    for path in sorted(Path(folder).glob("*.y*ml")):
        try:
            st = path.stat()
            files.append((str(path), st.st_size, st.st_mtime_ns, st.st_ino))
        except OSError:
            files.append((str(path), None, None, None))
    return _read(tuple(files), str(folder))


@functools.lru_cache(maxsize=4)
def _read(files: tuple, folder: str) -> dict[str, dict[str, Any]]:
    from grpo_lab.trainer.config import ConfigError, from_dict, read_config_file

    out: dict[str, dict[str, Any]] = {DEMO: {}}
    for path in (Path(f[0]) for f in files):
        try:
            values = {k.replace("-", "_"): v for k, v in read_config_file(str(path)).items()}
            from_dict({**values, "name": "preset", "runs_dir": str(folder)})  # the trainer's own checks
            out[_label(path)] = values
        except (ConfigError, OSError, UnicodeDecodeError) as exc:
            out[f"{path.name} (unusable)"] = {"error": f"{path.name}: {exc}"}
    return out


def missing_requirement(values: dict[str, Any]) -> str | None:
    """What must be installed before these options can run, in one line; None when nothing."""
    if values.get("model") != "smollm2":
        return None
    from grpo_lab.trainer import smollm
    from grpo_lab.trainer.config import ConfigError

    try:
        smollm.gguf_path()
    except ConfigError as exc:
        return str(exc)
    return None
