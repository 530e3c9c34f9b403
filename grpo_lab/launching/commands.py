"""The trainer's command line, built from checked values and read back from a launch record.

Form values go to the trainer as an argument list, never through a shell: one process runs
`python -m grpo_lab.trainer ARGS --runs-dir RUNS`; several run under torchrun on this machine
(`python -m torch.distributed.run --standalone --nproc-per-node N -m grpo_lab.trainer ...`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def flag_value(value: Any) -> str:
    """One option's value as the trainer's parser reads it (a dict: `k=v,k=v`, as --reward-params takes it).

    >>> flag_value({"a": 1, "b": "x"}), flag_value(0.04)
    ('a=1,b=x', '0.04')
    """
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def trainer_argv(values: dict[str, Any]) -> list[str]:
    """The trainer's options for `values` (`--runs-dir` is added by trainer_command; `resume` by resume alone).

    >>> trainer_argv({"name": "demo", "kl_coef": 0.04, "runs_dir": "runs", "resume": True})
    ['--name', 'demo', '--kl-coef', '0.04']
    """
    argv = []
    for key, value in values.items():
        if key in ("runs_dir", "resume"):
            continue
        argv += [f"--{key.replace('_', '-')}", flag_value(value)]
    return argv


def trainer_command(argv: list[str], runs_dir: Path, processes: int = 1) -> list[str]:
    """The trainer's command line: one process, or `processes` of them under torchrun on this machine."""
    launcher = [] if processes == 1 else ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                                          str(processes)]
    return [sys.executable, *launcher, "-m", "grpo_lab.trainer", *argv, "--runs-dir", str(Path(runs_dir).resolve())]


def trainer_args_in(command: Any) -> list[str] | None:
    """The trainer's own arguments in a started command (`... -m grpo_lab.trainer ARGS`, under torchrun too).

    >>> trainer_args_in(["python", "-m", "torch.distributed.run", "-m", "grpo_lab.trainer", "--name", "a"])
    ['--name', 'a']
    >>> trainer_args_in("python -m grpo_lab.trainer") is None
    True
    """
    if not isinstance(command, list):
        return None
    for i in range(len(command) - 1):
        if command[i] == "-m" and command[i + 1] in ("grpo_lab.trainer", "trainer"):
            return command[i + 2:]
    return None
