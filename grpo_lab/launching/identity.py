"""Which process is the trainer of which run, from /proc: its command line, working directory and
environment. A pid read from a runs folder is input: it may name any process of this user."""

from __future__ import annotations

import hmac
import os
from pathlib import Path

from grpo_lab.launching.keys import NONCE_ENV, run_nonce
from grpo_lab.rundir.layout import RUNS_DIR_ENV


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        return []


def environ(pid: int) -> dict[str, str] | None:
    """The environment a process started with; None when unreadable (another user's process)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            items = [a.decode(errors="replace").partition("=") for a in fh.read().split(b"\0") if a]
    except OSError:
        return None
    return {k: v for k, _, v in items}


def module_of(args: list[str]) -> str | None:
    """The module a python command line runs (`python [-u ...] -m MODULE`), or the console script's
    name; None for anything else (`python -c ...`, a shell, a decoy naming the module later on)."""
    for i, arg in enumerate(args[1:], start=1):
        if arg == "-m":
            return args[i + 1] if i + 1 < len(args) else None
        if not arg.startswith("-") or arg in ("-c", "-"):
            return Path(arg).name if not arg.startswith("-") else None
    return None


def option(args: list[str], flag: str) -> str | None:
    """The last value of `flag` (argparse: the last one wins), as `--flag V` or `--flag=V`."""
    value = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value


def runs_trainer_of(args: list[str], name: str) -> bool:
    """`args` run the trainer (directly, as grpo-lab-train, or under torchrun) for run `name`."""
    module = module_of(args)
    if module == "torch.distributed.run":  # torchrun [its options] -m grpo_lab.trainer ...
        rest = args[args.index("-m") + 2:] if "-m" in args else []
        module = rest[rest.index("-m") + 1] if "-m" in rest[:-1] else None
    # "trainer": a run this dashboard launched before the package was named grpo_lab
    return module in ("grpo_lab.trainer", "trainer", "grpo-lab-train") and option(args, "--name") == name


def runs_folder(pid: int, args: list[str], env: dict[str, str]) -> Path | None:
    """The runs folder a trainer process writes: its --runs-dir, else GRPO_LAB_RUNS_DIR, else ./runs,
    relative to its own working directory (as the trainer resolves it)."""
    folder = option(args, "--runs-dir") or env.get(RUNS_DIR_ENV) or "runs"
    try:
        return (Path(os.readlink(f"/proc/{pid}/cwd")) / folder).resolve()
    except OSError:
        return None


def of_this_folder(pid: int, name: str, runs_dir: Path) -> bool:
    """Process `pid` trains runs_dir/name: it carries that run's nonce, or (started by hand, with no
    nonce) its runs folder resolves to runs_dir. Another user's process (environ unreadable): no."""
    env = environ(pid)
    if env is None:
        return False
    if NONCE_ENV in env:  # launched by a dashboard: the nonce alone decides
        return hmac.compare_digest(env[NONCE_ENV], run_nonce(runs_dir, name))
    return runs_folder(pid, cmdline(pid), env) == Path(runs_dir).resolve()  # started by hand
