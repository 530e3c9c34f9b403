"""The trainer's side of environment classes (grpo_lab/tools/environments.py holds TRL's rules): the reward
source an environment adds to a run's rewards, each rollout's fresh instance and prompt, and the renderer
that puts an observation into the prompt as the task's prompts are rendered. Errors are the trainer's
(ConfigError, one line)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from grpo_lab.tools.environments import environment_rewards, owns_reward, start
from grpo_lab.tools.registry import ToolError, environment_tools, load_environment, template_tools
from grpo_lab.trainer.config import ConfigError
from grpo_lab.trainer.tasks import Task, render


@dataclass(frozen=True)
class Prompter:
    """Renders a dataset prompt as the trainer gives it to the model (tasks.render: system prompt,
    chat template, tool descriptions), for a rollout whose environment added an observation."""

    tokenizer: Any
    chat_template: str
    system_prompt: str
    task_system: str
    tools: tuple = ()

    def __call__(self, prompt: Any) -> str:
        task = Task("environment", [{"prompt": prompt, "prompt_id": 0}], system=self.task_system)
        return render(task, self.tokenizer, self.chat_template, self.system_prompt, list(self.tools)).rows[0]["prompt"]


def source_name(environment_spec: str) -> str | None:
    """The name the environment's get_reward scores under (its class's, as in TRL), which config.json
    lists among the run's rewards at weight 1; None without an environment or without get_reward.
    A ConfigError (one line) when the class does not load."""
    if not environment_spec:
        return None
    try:
        cls = load_environment(environment_spec)
    except ToolError as exc:
        raise ConfigError(str(exc)) from None
    return cls.__name__ if owns_reward(cls) else None


def run_rewards(environment_spec: str, configured: dict, listed: float | None = None
                ) -> dict[str, tuple[Callable, float]]:
    """The reward sources `--environment` adds to the configured ones (TRL's get_reward source, or
    none); a ConfigError (one line) when the run would have no reward at all. `listed`: the weight
    the run's rewards give the source by its name (config.json lists it; a resumed run reads it
    back): TRL's 1, or a one-line refusal."""
    if not environment_spec:
        return {}
    try:
        added = environment_rewards(load_environment(environment_spec), configured)
    except (ToolError, ValueError) as exc:
        raise ConfigError(str(exc)) from None
    if added and listed not in (None, 1.0):
        raise ConfigError(f"rewards: {next(iter(added))} is the environment's get_reward, which scores at weight 1 "
                          f"(as in TRL); got {listed:g}")
    if not configured and not added:
        raise ConfigError(f"rewards: none given, and environment {environment_spec} has no get_reward to score "
                          "with; name a reward with --rewards")
    return added


def start_rollouts(setup, rows: list[dict] | None, prompts: list[str], copies: int
                   ) -> tuple[list[str], list[dict], list | None]:
    """Each rollout's prompt text, toolbox and environment instance (None without a class), rollout
    i answering prompts[i // copies]: a fresh instance per rollout, reset with its row; a rollout
    whose reset returned an observation starts from the prompt re-rendered with it (`setup.prompter`)."""
    B = len(prompts) * copies
    if setup.environment is None:
        return [prompts[i // copies] for i in range(B)], [setup.tools] * B, None
    texts, boxes, envs = [], [], []
    for i in range(B):
        row = rows[i // copies] if rows else {"prompt": prompts[i // copies]}
        started = start(setup.environment, row, prompts[i // copies], getattr(setup, "prompter", None))
        texts.append(started.text)
        boxes.append(setup.tools | environment_tools(started.environment))
        envs.append(started.environment)
    return texts, boxes, envs



def with_prompter(setup, c):
    """The run's ToolSetup with its Prompter (the trainer components `c`: tokenizer, config, task),
    so an observation is rendered into the prompt as the task's prompts were."""
    if setup is None or setup.environment is None:
        return setup
    prompter = Prompter(c.tokenizer, c.cfg.chat_template, c.cfg.system_prompt, c.task.system,
                        tuple(template_tools(setup)))
    return dataclasses.replace(setup, prompter=prompter)
