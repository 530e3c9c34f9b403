"""Runs made by other trainers, as run directories the dashboard opens like its own.

`names` maps TRL's metric and argument names to ours (the one registry the callback, the importer,
the docs table and the tests read); `samples` turns completions into rows of tables/samples;
`trl` and `verl` read a finished TRL output folder and a verl rollout dump; `build` writes the
run directory into a temporary folder and renames it into place. grpo_lab/rundir/trl.py is the live path:
a TRL callback that writes the same run directory while TRL trains.
"""


def main(argv: list[str] | None = None) -> int:
    """grpo-lab-import's entry point. The command's module is `grpo_lab.rundir.import` (so that
    `python -m grpo_lab.rundir.import` reads as what it does), a name no console script can import:
    `import` is a keyword, and pip's generated `from grpo_lab.rundir.import import main` fails."""
    import importlib

    return importlib.import_module("grpo_lab.rundir.import").main(argv)
