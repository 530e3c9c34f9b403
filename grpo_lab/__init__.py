"""GRPO / PPO lab. The data flows trainer -> rundir (the run-directory contract) -> dashboard;
rewards score completions for the trainer. Each subpackage is importable on its own."""

from __future__ import annotations

from pathlib import Path

__version__ = "0.3.0"

PACKAGE = Path(__file__).resolve().parent
CONFIGS = PACKAGE / "configs"  # ready-made trainer options, also the dashboard's launch presets


def project_dir() -> Path:
    """The folder that relative paths (task files, models) are read from and trainers start in:
    the checkout this package runs from, or the current folder for an installed package."""
    checkout = PACKAGE.parent
    return checkout if (checkout / "pyproject.toml").is_file() else Path.cwd().resolve()
