"""The run directory: the contract between the trainer (writes) and the dashboard (reads).

Documented in docs/run-directory.md. Bump SCHEMA_VERSION when a file, table or column changes
meaning, and say what changed there.
"""

from grpo_lab.rundir.layout import SCHEMA_VERSION, TABLES, RunPaths

__all__ = ["SCHEMA_VERSION", "TABLES", "RunPaths"]
