"""What a launch from a page may reach: the launch form, the Groups page's rescore form and the queue
they write all go through check_launch.

- Paths typed into a form (task, model, held-out file), and those inside reward_params
  (REWARD_PATH_PARAMS: from a config file or a resumed run's config.json), must lie inside the data
  folders: the project, the runs folder, and those listed in GRPO_LAB_DATA_DIRS (separated by ':').
- A reward, tool or environment named as `module:function` must come from a module listed in
  GRPO_LAB_REWARD_MODULES (comma-separated prefixes); registered ones are always allowed.
- An interpreter named in reward_params never comes from the runs folder, and the sandbox's own
  switches (allow_unsandboxed, user) are the operator's, not a form's. In the dashboard's process the
  sandbox asks check_program before it starts any interpreter a reward names.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from grpo_lab import project_dir
from grpo_lab.rewards.programs import DATA_DIRS_ENV, data_dirs
from grpo_lab.rewards import programs

REWARD_MODULES_ENV = "GRPO_LAB_REWARD_MODULES"
PATH_OPTIONS = ("task", "model", "eval_split")
# the registered rewards' parameters that name a file or folder (grpo_lab/rewards/registry.py): a ratings
# file, a reward model (a folder, or a hub id), the interpreter code_tests runs completions with
REWARD_PATH_PARAMS = {"human_feedback": ("path",), "reward_model": ("model",), "code_tests": ("python",)}
ALWAYS_PATHS = ("path", "python")  # never a hub id: checked even without a leading / . ~
# a program a reward starts (in the sandbox): never from the runs folder, which pages and planted files
# write into (rewards/programs.py, the rule the command lines apply to a run's own files too)
PROGRAM_PARAMS = ("python",)
# code_tests' switches that weaken the sandbox: the operator's choice (GRPO_LAB_ALLOW_UNSANDBOXED where
# the dashboard starts), never a form's, which could then run a planted completion as this user
UNSAFE_SANDBOX = {"allow_unsandboxed": (False,), "user": ("nobody",)}


def check_launch(values: dict[str, Any], runs_dir: Path) -> str | None:
    """One line saying which form value reaches outside what the dashboard may use; None when fine."""
    from grpo_lab.trainer.data import is_data_file
    from grpo_lab.trainer.hub import looks_local

    allowed = data_dirs(runs_dir)
    paths = [(option, values.get(option), False) for option in PATH_OPTIONS]
    params = values.get("reward_params")
    for reward, names in REWARD_PATH_PARAMS.items():  # paths inside reward_params (a config file, a resumed run)
        given = params.get(reward) if isinstance(params, dict) else None
        paths += [(f"reward_params.{reward}.{n}", given.get(n), n in ALWAYS_PATHS) for n in names
                  if isinstance(given, dict)]
    for option, value, always in paths:
        if option.rpartition(".")[2] in PROGRAM_PARAMS:  # the rule the command lines apply to a run's files too
            if (refused := programs.check_program(value, runs_dir, option)) is not None:
                return refused
            continue
        if not isinstance(value, str) or not value or not (always or looks_local(value) or is_data_file(value)):
            continue  # a built-in name or a hub id
        path = Path(value).expanduser()
        resolved = (path if path.is_absolute() else project_dir() / path).resolve()
        if not any(resolved.is_relative_to(folder) for folder in allowed):
            return (f"{option}: {value} is outside the folders the dashboard may read ({', '.join(map(str, allowed))}); "
                    f"add its folder to {DATA_DIRS_ENV}")
    code_tests = params.get("code_tests") if isinstance(params, dict) else None
    for name, safe in UNSAFE_SANDBOX.items():
        if isinstance(code_tests, dict) and name in code_tests and code_tests[name] not in safe:
            return (f"reward_params.code_tests.{name}: {code_tests[name]!r} weakens the sandbox, which only the "
                    f"dashboard's operator may do (start it with GRPO_LAB_ALLOW_UNSANDBOXED=1); allowed here: "
                    f"{', '.join(map(repr, safe))}")
    prefixes = [p.strip() for p in os.environ.get(REWARD_MODULES_ENV, "").split(",") if p.strip()]
    rewards = values.get("rewards")
    names = rewards.keys() if isinstance(rewards, dict) else [
        item.split("=")[0].strip() for item in str(rewards or "").split(",")]
    for name in names:
        module = name.partition(":")[0]
        if ":" in name and not any(module == p or module.startswith(p + ".") for p in prefixes):
            return (f"rewards: {name!r} imports module {module!r}, which the dashboard does not run; list it in "
                    f"{REWARD_MODULES_ENV} (registered rewards need nothing)")
    # tools and environments are user code too (module:function, module:Class): the same allow-list
    for option in ("tools", "environment"):
        for spec in (s.strip() for s in str(values.get(option) or "").split(",")):
            module = spec.partition(":")[0]
            if ":" in spec and not any(module == p or module.startswith(p + ".") for p in prefixes):
                return (f"{option}: {spec!r} imports module {module!r}, which the dashboard does not run; list it in "
                        f"{REWARD_MODULES_ENV} (built-in tools need nothing)")
    return None


def check_program(python: str, runs_dir: Path) -> str | None:
    """The launch check for an interpreter a reward names: what the sandbox asks before it starts one
    in the dashboard's process (rewards.sandbox.set_program_check); rewards/programs.py's rule."""
    return programs.check_program(python, runs_dir)
