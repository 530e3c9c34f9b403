"""Score a rollout with the configured rewards; failures become None and a log line, never a crash.

Also where a step's batch is collected: sample, score, then pi_old's log-probabilities, and
DAPO's dynamic sampling, which samples more prompts in place of groups with no learning signal.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from grpo_lab import rewards
from grpo_lab.objective.options import group_of
from grpo_lab.rewards import context as reward_context
from grpo_lab.objective.functions import group_advantages
from grpo_lab.trainer import conversation, multiturn
from grpo_lab.trainer.decode import Sampling
from grpo_lab.trainer.rollout import Rollout, sample, token_logprobs

if TYPE_CHECKING:  # setup.py imports this module: the type alone, no cycle
    from grpo_lab.trainer.setup import Components

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
    a reward's failure is logged, never raised, and its first message kept in `c.reward_notes`."""
    tools = multiturn.setup_for(c) if turns is not None else None
    prompts, shaped, columns = reward_inputs(rows, completions, per_prompt, turns=turns, tools=tools,
                                             environments=environments)
    scores = rewards.score_all(c.reward_fns if fns is None else fns, prompts, shaped, columns,
                               completion_ids=completion_ids, trainer_state=trainer_state(c, step))
    for message in scores.messages:
        c.log.warning("%s%s", log_prefix, message)
    for name, message in scores.first_error.items():
        c.reward_notes.setdefault(name, message)
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


def pick_scores(scores: "rewards.Scores", pick: list[int]) -> "rewards.Scores":
    """The scores of samples `pick`, in that order. Failure counts and logged metrics belong to the
    call that scored the whole batch: they stay behind (collect_with_signal counts them per round)."""
    return rewards.Scores(total=[scores.total[i] for i in pick],
                          per_reward={k: [v[i] for i in pick] for k, v in scores.per_reward.items()},
                          extra={k: [v[i] for i in pick] for k, v in scores.extra.items()},
                          first_error=scores.first_error)


def join_scores(parts: list["rewards.Scores"], sizes: list[int]) -> "rewards.Scores":
    """Several batches' scores end to end; `sizes`: each part's samples (a part missing an
    extra column gets None there)."""
    names = list(parts[0].per_reward)
    columns = dict.fromkeys(k for p in parts for k in p.extra)
    logged = dict.fromkeys(k for p in parts for k in p.logged)
    return rewards.Scores(
        total=[v for p in parts for v in p.total],
        per_reward={k: [v for p in parts for v in p.per_reward[k]] for k in names},
        errors={k: sum(p.errors.get(k, 0) for p in parts) for k in names},
        extra={k: [v for p, n in zip(parts, sizes) for v in p.extra.get(k, [None] * n)] for k in columns},
        logged={k: [v for p in parts for v in p.logged.get(k, [])] for k in logged},
        first_error={k: v for p in reversed(parts) for k, v in p.first_error.items()})


@dataclass
class Batch:
    """One step's on-policy batch, as both algorithms start from it. Completion i answers
    rows[group_of(i)]: its G completions of a prompt come one after the other."""

    rows: list[dict]
    group_size: int  # G
    rollout: Rollout
    mask: torch.Tensor  # (B, T) float completion mask
    scores: "rewards.Scores"
    totals: torch.Tensor  # (B,) NaN where unscored
    old_logp: torch.Tensor  # (B, T) log pi_old; NaN until `with_logprobs`
    entropy: torch.Tensor  # (B, T); NaN until `with_logprobs`
    ref_logp: torch.Tensor | None  # (B, T); None without a reference model (or before `with_logprobs`)

    def group_of(self, i: int) -> int:
        """The group (index into rows) of completion i (objective.options.group_of, with this batch's G)."""
        return group_of(i, self.group_size)

    def row_of(self, i: int) -> dict:
        """The prompt row completion i answers."""
        return self.rows[self.group_of(i)]

    def select_groups(self, groups: torch.Tensor) -> "Batch":
        """The groups `groups` ((N,) bool), each with its G completions, in order."""
        G = self.group_size
        kept = groups.nonzero().flatten().tolist()
        rows = torch.tensor([g * G + j for g in kept for j in range(G)], dtype=torch.long)
        scores = pick_scores(self.scores, rows.tolist())
        rollout = self.rollout.select(rows).trimmed()  # the padding only dropped rows needed goes too
        T = rollout.completion_mask.shape[1]
        return Batch(rows=[self.rows[g] for g in kept], group_size=G, rollout=rollout, mask=self.mask[rows, :T],
                     scores=scores, totals=self.totals[rows], old_logp=self.old_logp[rows, :T],
                     entropy=self.entropy[rows, :T], ref_logp=None if self.ref_logp is None else self.ref_logp[rows, :T])


def loss_mask(rollout: Rollout) -> torch.Tensor:
    """(B, T) float: the completion's tokens the policy wrote. A tool's result tokens
    (multiturn.py) are context, not policy: no log-prob ratio, KL or loss."""
    mask = rollout.completion_mask.float()
    return mask if rollout.tool_mask is None else mask * (1 - rollout.tool_mask.float())


def sample_groups(c: Components, rows: list[dict], step: int = 0) -> Batch:
    """G completions of each row from the current policy (pi_old), scored; log-probabilities not yet taken."""
    cfg = c.cfg
    with c.timer.phase("generation"):
        how = Sampling(copies=cfg.group_size, max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
                       synced=c.dist.sharded)
        tools = multiturn.setup_for(c)
        rollout = (sample(c.policy, c.tokenizer, [r["prompt"] for r in rows], how, c.device) if tools is None else
                   multiturn.sample_with_tools(c.policy, c.tokenizer, [r["prompt"] for r in rows], how, c.device,
                                               tools, rows))
    c.timer.count("generation", rollout.completion_mask.sum())
    with c.timer.phase("reward"):
        scores, totals = score_rollout(c, rows, rollout, step)
    mask = loss_mask(rollout)
    nan = torch.full_like(mask, math.nan)
    return Batch(rows=rows, group_size=cfg.group_size, rollout=rollout, mask=mask, scores=scores, totals=totals,
                 old_logp=nan, entropy=nan.clone(), ref_logp=None)


def with_logprobs(c: Components, batch: Batch, policy: bool = True) -> Batch:
    """pi_old's and the reference's log-probabilities, taken once, before any update, by the same
    forward pass the updates use: the first pass then sees ratio 1 exactly.

    policy False: the reference's only. With one pass over one minibatch, pi_old is the update's
    own forward, detached (GRPO takes it there), so a separate forward would only repeat it."""
    old_logp, entropy = batch.old_logp, batch.entropy
    with torch.no_grad():
        if policy:
            with c.timer.phase("old_logp"):
                old_logp, entropy = token_logprobs(c.policy, batch.rollout, c.cfg.temperature, with_entropy=True)
        with c.timer.phase("ref"):
            ref_logp = (token_logprobs(c.reference, batch.rollout, c.cfg.temperature)[0]
                        if c.reference is not None else None)
    return Batch(rows=batch.rows, group_size=batch.group_size, rollout=batch.rollout, mask=batch.mask,
                 scores=batch.scores, totals=batch.totals, old_logp=old_logp, entropy=entropy, ref_logp=ref_logp)


def collect_batch(c: Components, step: int, policy_logprobs: bool = True) -> Batch:
    """Sample G completions per prompt from the current policy (pi_old), score them, and take
    pi_old's (unless policy_logprobs is False) and the reference's log-probabilities once, before
    any update. With several processes, this process's share of the step's prompts."""
    rows = c.dist.share(c.task.batch(step, c.cfg.prompts_per_step, c.cfg.seed))
    return with_logprobs(c, sample_groups(c, rows, step), policy=policy_logprobs)


# --- dynamic sampling (DAPO) --------------------------------------------------------------------


def _pad_right(t: torch.Tensor, width: int, value: float) -> torch.Tensor:
    return torch.nn.functional.pad(t, (0, width - t.shape[1]), value=value)


def concat_batches(parts: list[Batch], pad_id: int) -> Batch:
    """One batch of several (rounds of sampling): prompts left-padded to the longest, completions
    right-padded to the longest, as `sample` lays out one batch. Empty parts are skipped."""
    parts = [p for p in parts if p.rows] or parts[:1]
    if len(parts) == 1:
        return parts[0]
    P = max(p.rollout.prompt_len for p in parts)
    T = max(p.mask.shape[1] for p in parts)

    def ids(p: Batch, tensor: torch.Tensor, pad: int) -> torch.Tensor:
        prompt, completion = tensor[:, :p.rollout.prompt_len], tensor[:, p.rollout.prompt_len:]
        return torch.cat([torch.nn.functional.pad(prompt, (P - prompt.shape[1], 0), value=pad),
                          _pad_right(completion, T, pad)], dim=1)

    cat = lambda name, value: torch.cat([_pad_right(getattr(p, name), T, value) for p in parts])  # noqa: E731
    rollout = Rollout(
        input_ids=torch.cat([ids(p, p.rollout.input_ids, pad_id) for p in parts]),
        attention_mask=torch.cat([ids(p, p.rollout.attention_mask, 0) for p in parts]),
        prompt_len=P,
        completion_mask=torch.cat([_pad_right(p.rollout.completion_mask, T, 0) for p in parts]),
        truncated=torch.cat([p.rollout.truncated for p in parts]),
        completions=[text for p in parts for text in p.rollout.completions],
        generation_s=sum(p.rollout.generation_s for p in parts),
        tool_mask=(torch.cat([_pad_right(p.rollout.tool_mask, T, 0) for p in parts])
                   if all(p.rollout.tool_mask is not None for p in parts) else None),
        turns=[t for p in parts for t in p.rollout.turns] if all(p.rollout.turns is not None for p in parts) else None)
    scores = join_scores([p.scores for p in parts], [len(p.rollout.completions) for p in parts])
    has_ref = all(p.ref_logp is not None for p in parts)
    return Batch(rows=[r for p in parts for r in p.rows], group_size=parts[0].group_size, rollout=rollout,
                 mask=cat("mask", 0.0), scores=scores, totals=torch.cat([p.totals for p in parts]),
                 old_logp=cat("old_logp", math.nan), entropy=cat("entropy", math.nan),
                 ref_logp=torch.cat([_pad_right(p.ref_logp, T, math.nan) for p in parts]) if has_ref else None)


def extra_prompts(task, step: int, round_no: int, n: int, seed: int, seen: set[str]) -> list[dict]:
    """n more prompts for round `round_no` (from 1) of dynamic sampling at `step`: a seeded shuffle
    of (seed, step, round), so a resumed run draws the same ones; prompts not yet drawn this step
    first, repeats only when the task runs out."""
    order = list(range(len(task.rows)))
    random.Random(f"{seed}/dynamic/{step}/{round_no}").shuffle(order)
    fresh = [task.rows[i] for i in order if str(task.rows[i]["prompt_id"]) not in seen]
    return (fresh + [task.rows[i] for i in order])[:n]


@dataclass
class DynamicBatch:
    """What dynamic sampling collected in one step."""

    kept: Batch  # the groups with a spread (at most prompts_per_step), log-probabilities taken
    dropped: Batch  # the groups whose rewards were all equal, in the order sampled (no log-probabilities)
    sampled: Batch  # every group sampled: kept first, then dropped (for the per-completion scalars)
    rounds: int  # sampling rounds: 1 + extra rounds


def collect_with_signal(c: Components, step: int) -> DynamicBatch:
    """DAPO's dynamic sampling (Yu et al., "DAPO", 2025, arXiv:2503.14476, section 3.2).

    A group whose rewards are all equal has advantages 0: it costs its sampling and teaches
    nothing. Drop such groups, and sample more prompts in their place until `prompts_per_step`
    groups have a spread, or `dynamic_sampling_rounds` extra rounds have been sampled; the step
    then trains on the groups with a spread it has (possibly none: no update). Each extra round
    draws only as many prompts as are missing, so no group with a spread is ever thrown away.
    """
    cfg = c.cfg
    rows = c.task.batch(step, cfg.prompts_per_step, cfg.seed)
    kept, dropped, seen, rounds, errors, rounds_scores = [], [], set(), 0, {}, []
    while rows:
        got = sample_groups(c, rows, step)
        rounds += 1
        rounds_scores.append(got.scores)
        seen |= {str(r["prompt_id"]) for r in rows}
        no_signal = group_advantages(got.totals.view(-1, cfg.group_size)).zero_std
        kept.append(got.select_groups(~no_signal))
        dropped.append(got.select_groups(no_signal))
        errors = {k: errors.get(k, 0) + n for k, n in got.scores.errors.items()}
        missing = cfg.prompts_per_step - sum(len(k.rows) for k in kept)
        if missing == 0 or rounds > cfg.dynamic_sampling_rounds:
            break
        rows = extra_prompts(c.task, step, rounds, missing, cfg.seed, seen)
    pad_id = c.tokenizer.pad_token_id or 0
    kept_batch, dropped_batch = concat_batches(kept, pad_id), concat_batches(dropped, pad_id)
    if kept_batch.rows:
        kept_batch = with_logprobs(c, kept_batch)
    sampled = concat_batches([kept_batch, dropped_batch], pad_id)
    # failures and logged metrics counted per round: once each, wherever its group went
    logged = join_scores(rounds_scores, [len(s.total) for s in rounds_scores]).logged
    sampled = replace(sampled, scores=replace(sampled.scores, errors=errors, logged=logged))
    return DynamicBatch(kept=kept_batch, dropped=dropped_batch, sampled=sampled, rounds=rounds)


def minibatch_indices(batch: int, minibatches: int) -> list[torch.Tensor]:
    """Row indices of each minibatch of one pass: the whole batch, or a fresh shuffle cut in pieces."""
    order = torch.randperm(batch) if minibatches > 1 else torch.arange(batch)
    return [chunk for chunk in order.chunk(minibatches) if chunk.numel()]
