"""Which interpreter a reward may run, when its name comes from somewhere other than the person at the
machine: a page's form, a queued entry, or a run's own files (config.json), which planted runs and pages
write. One rule for all of them (launching/allowed.py applies it to forms, the trainer's --resume and
grpo-lab-rescore to what a run's config.json names): the program lies inside the data folders (the
project, the runs folder, those in GRPO_LAB_DATA_DIRS) and never inside the runs folder.

>>> from pathlib import Path
>>> check_program("/etc/passwd", Path("/tmp/runs")).startswith("reward_params.code_tests.python: /etc/passwd is outside")
True
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from grpo_lab import project_dir

DATA_DIRS_ENV = "GRPO_LAB_DATA_DIRS"
OPTION = "reward_params.code_tests.python"  # the one program a registered reward names


def data_dirs(runs_dir: Path) -> list[Path]:
    """The folders a launch from a page may read: the project, the runs folder, GRPO_LAB_DATA_DIRS's."""
    extra = [Path(p).expanduser() for p in os.environ.get(DATA_DIRS_ENV, "").split(os.pathsep) if p.strip()]
    return [p.resolve() for p in (project_dir(), Path(runs_dir), *extra)]


def check_program(python: Any, runs_dir: Path, option: str = OPTION) -> str | None:
    """One line saying why `python` may not be started for others; None when it may."""
    if python is None:
        return None
    if not isinstance(python, str) or not python:
        return f"{option}: {python!r:.80} is not a path to an interpreter"
    path = Path(python).expanduser()
    resolved = (path if path.is_absolute() else project_dir() / path).resolve()
    allowed = data_dirs(runs_dir)
    if not any(resolved.is_relative_to(folder) for folder in allowed):
        return (f"{option}: {python:.200} is outside the folders the dashboard may read "
                f"({', '.join(map(str, allowed))}); add its folder to {DATA_DIRS_ENV}")
    if resolved.is_relative_to(Path(runs_dir).resolve()):
        return (f"{option}: {python:.200} is inside the runs folder; an interpreter named by a run's files must come "
                f"from the project or {DATA_DIRS_ENV}")
    return None


def named_program(config: Any) -> Any:
    """The interpreter a config mapping (config.json, a form's values) names for code_tests, or None."""
    params = config.get("reward_params") if isinstance(config, dict) else None
    code_tests = params.get("code_tests") if isinstance(params, dict) else None
    return code_tests.get("python") if isinstance(code_tests, dict) else None
