"""Stage 2 of a step: score the sampled completions with the configured rewards, called as TRL calls them.

A reward's failure becomes None and a log line, never a crash. `score` turns sampling's result into
the step's `Batch` (batch.py): scores, totals (NaN where unscored) and the loss mask; the
log-probabilities come later (logprobs.py). The evaluation (evaluate.py) scores through here too.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from grpo_lab import rewards
from grpo_lab.objective.options import group_of
from grpo_lab.rewards import context as reward_context
from grpo_lab.tools import environments as env_rules
from grpo_lab.trainer import conversation, multiturn
from grpo_lab.trainer.batch import Batch, loss_mask
from grpo_lab.trainer.rollout import Rollout

if TYPE_CHECKING:  # the type alone: Components is built by run.py's prepare
    from grpo_lab.trainer.components import Components
    from grpo_lab.trainer.sampling import Sampled

# Row fields that are not reward inputs: the prompt goes as `prompts` (the dataset's, kept in
# `source_prompt` by tasks.render), prompt_id is ours.
NOT_COLUMNS = ("prompt", "prompt_id", "source_prompt")


def trainer_state(c: Components, step: int):
    """What TRL hands a reward as `trainer_state` at `step` (see `make_trainer_state`)."""
    return make_trainer_state(c.cfg, len(c.task.rows), step, c.dist.writer)


def make_trainer_state(cfg, n_rows: int, step: int, writer: bool = True):
    """A transformers TrainerState, as TRL's reward sees it at step `step` (from 1).

    global_step counts the optimizer steps already taken (0 while step 1 samples), as in TRL,
    where the state advances after each update; a reward that anneals over
    `global_step / max_steps` then reads the same numbers here as there."""
    from transformers import TrainerState  # noqa: PLC0415 - the trainer has it loaded already

    rows = max(n_rows, 1)
    return TrainerState(global_step=max(step - 1, 0), max_steps=cfg.max_steps,
                        epoch=max(step - 1, 0) * cfg.prompts_per_step / rows,
                        num_train_epochs=max(1, -(-cfg.max_steps * cfg.prompts_per_step // rows)),
                        train_batch_size=cfg.prompts_per_step * cfg.group_size, logging_steps=1,
                        is_world_process_zero=writer)


def reward_inputs(rows: list[dict], completions: list[str], per_prompt: int, *,
                  turns: list[list[dict]] | None = None, tools: multiturn.ToolSetup | None = None,
                  environments: list | None = None) -> tuple[list, list, dict]:
    """(prompts, completions, columns) as TRL passes them: the prompt as the dataset gives it, a
    conversational prompt's completion as [{"role": "assistant", "content": text}], every column.

    With tools (`turns`: each completion's turns, multiturn.py), a conversational prompt's
    completion is the whole conversation as TRL's tool loop builds it (assistant messages with
    `tool_calls`, `tool` messages with the results; conversation.py), a plain-text prompt's stays
    the text the model and the tools wrote; and the keyword `tool_calls` (ours; TRL has none)
    lists each completion's calls; with an environment class, the keyword `environments` (TRL's)
    holds each completion's instance. grpo_lab/rewards/README.md says what each reward reads."""
    of_row = [rows[group_of(i, per_prompt)] for i in range(len(completions))]
    prompts = [row.get("source_prompt", row["prompt"]) for row in of_row]
    prompts = env_rules.prompts_seen(environments, prompts)  # with reset's observation, as TRL's
    first = conversation.first_parameters(tools.tools, tools.environment) if tools is not None else {}
    openers = tuple(tag.open for tag in tools.tags) if tools is not None else ()
    shaped = [(conversation.messages(turns[i], first, openers) if turns is not None
               else [{"role": "assistant", "content": text}]) if isinstance(prompt, list) else text
              for i, (prompt, text) in enumerate(zip(prompts, completions))]
    keys = dict.fromkeys(key for row in rows for key in row if key not in NOT_COLUMNS)
    columns = {key: [row.get(key) for row in of_row] for key in keys}
    if turns is not None:  # a dataset column of this name is shadowed in a run with tools
        columns["tool_calls"] = [conversation.calls(t, first) for t in turns]
    if environments is not None:
        columns["environments"] = environments
    return prompts, shaped, columns


def score_completions(c: Components, rows: list[dict], completions: list[str], per_prompt: int, log_prefix: str = "",
                      fns: dict | None = None, *, completion_ids: list[list[int]] | None = None,
                      step: int = 0, turns: list[list[dict]] | None = None,
                      environments: list | None = None) -> "rewards.Scores":
    """Score completions that answer each row `per_prompt` times in turn, with `fns` (default: the
    run's rewards), called as TRL calls them (with `turns`: as reward_inputs shapes a tool rollout);
    a reward's failure is logged, never raised, and its first message returned in the scores'
    `first_error` (the step hands it to the run doctor: step_result.StepResult.reward_notes)."""
    tools = multiturn.setup_for(c) if turns is not None else None
    prompts, shaped, columns = reward_inputs(rows, completions, per_prompt, turns=turns, tools=tools,
                                             environments=environments)
    scores = rewards.score_all(c.reward_fns if fns is None else fns, prompts, shaped, columns,
                               completion_ids=completion_ids, trainer_state=trainer_state(c, step))
    for message in scores.messages:
        c.log.warning("%s%s", log_prefix, message)
    return scores


def completion_id_lists(rollout: Rollout) -> list[list[int]]:
    """Each completion's token ids up to and including its EOS (TRL's `completion_ids_list`)."""
    mask = rollout.completion_mask.bool().cpu()
    return [row[keep].tolist() for row, keep in zip(rollout.completion_ids.cpu(), mask)]


def score_rollout(c: Components, rows: list[dict], rollout: Rollout, step: int = 0) -> tuple["rewards.Scores", torch.Tensor]:
    """(per-reward scores, total reward per completion as a float tensor with NaN for None).
    A tool rollout's rewards see its turns (reward_inputs)."""
    with reward_context.scoring(reward_context.of_step(c, rows, step)):  # where each completion sits (`human`)
        scores = score_completions(c, rows, rollout.completions, c.cfg.group_size,
                                   completion_ids=completion_id_lists(rollout), step=step, turns=rollout.turns,
                                   environments=rollout.environments)
    totals = torch.tensor([math.nan if t is None else float(t) for t in scores.total], dtype=torch.float32)
    return scores, totals


def score(c: Components, sampled: Sampled, step: int) -> Batch:
    """The sampled completions scored: the step's batch, its log-probabilities not yet taken (NaN)."""
    with c.timer.phase("reward"):
        scores, totals = score_rollout(c, sampled.rows, sampled.rollout, step)
    mask = loss_mask(sampled.rollout)
    nan = torch.full_like(mask, math.nan)
    return Batch(rows=sampled.rows, group_size=c.cfg.group_size, rollout=sampled.rollout, mask=mask, scores=scores,
                 totals=totals, old_logp=nan, entropy=nan.clone(), ref_logp=None)
