"""Score a rollout with the configured rewards; failures become None and a log line, never a crash.

Also where a step's batch is collected: sample, score, then pi_old's log-probabilities, and
DAPO's dynamic sampling, which samples more prompts in place of groups with no learning signal.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

import torch

from grpo_lab import rewards
from grpo_lab.trainer.objective import group_advantages
from grpo_lab.trainer.rollout import Rollout, sample, token_logprobs

# Row fields that are not reward inputs.
NOT_COLUMNS = ("prompt", "prompt_id")


def score_completions(c, rows: list[dict], completions: list[str], per_prompt: int, log_prefix: str = "",
                      fns: dict | None = None) -> "rewards.Scores":
    """Score completions that answer each row `per_prompt` times in turn, with `fns` (default: the
    run's rewards); a reward's failure is logged, never raised."""
    of_row = [rows[i // per_prompt] for i in range(len(completions))]
    columns = {key: [row.get(key) for row in of_row] for key in rows[0] if key not in NOT_COLUMNS}
    scores = rewards.score_all(c.reward_fns if fns is None else fns, [row["prompt"] for row in of_row],
                               completions, columns)
    for message in scores.messages:
        c.log.warning("%s%s", log_prefix, message)
    return scores


def score_rollout(c, rows: list[dict], rollout: Rollout) -> tuple["rewards.Scores", torch.Tensor]:
    """(per-reward scores, total reward per completion as a float tensor with NaN for None)."""
    scores = score_completions(c, rows, rollout.completions, c.cfg.group_size)
    totals = torch.tensor([math.nan if t is None else float(t) for t in scores.total], dtype=torch.float32)
    return scores, totals


@dataclass
class Batch:
    """One step's on-policy batch, as both algorithms start from it. Completion i answers rows[i // G]."""

    rows: list[dict]
    group_size: int  # G
    rollout: Rollout
    mask: torch.Tensor  # (B, T) float completion mask
    scores: "rewards.Scores"
    totals: torch.Tensor  # (B,) NaN where unscored
    old_logp: torch.Tensor  # (B, T) log pi_old; NaN until `with_logprobs`
    entropy: torch.Tensor  # (B, T); NaN until `with_logprobs`
    ref_logp: torch.Tensor | None  # (B, T); None without a reference model (or before `with_logprobs`)

    def select_groups(self, groups: torch.Tensor) -> "Batch":
        """The groups `groups` ((N,) bool), each with its G completions, in order."""
        G = self.group_size
        kept = groups.nonzero().flatten().tolist()
        rows = torch.tensor([g * G + j for g in kept for j in range(G)], dtype=torch.long)
        pick = rows.tolist()
        scores = rewards.Scores(total=[self.scores.total[i] for i in pick],
                                per_reward={k: [v[i] for i in pick] for k, v in self.scores.per_reward.items()})
        rollout = self.rollout.select(rows).trimmed()  # the padding only dropped rows needed goes too
        T = rollout.completion_mask.shape[1]
        return Batch(rows=[self.rows[g] for g in kept], group_size=G, rollout=rollout, mask=self.mask[rows, :T],
                     scores=scores, totals=self.totals[rows], old_logp=self.old_logp[rows, :T],
                     entropy=self.entropy[rows, :T], ref_logp=None if self.ref_logp is None else self.ref_logp[rows, :T])


def sample_groups(c, rows: list[dict]) -> Batch:
    """G completions of each row from the current policy (pi_old), scored; log-probabilities not yet taken."""
    cfg = c.cfg
    with c.timer.phase("generation"):
        rollout = sample(c.policy, c.tokenizer, [r["prompt"] for r in rows], cfg.group_size, cfg.max_new_tokens,
                         cfg.temperature, c.device, synced=c.dist.sharded)
    c.timer.count("generation", rollout.completion_mask.sum())
    with c.timer.phase("reward"):
        scores, totals = score_rollout(c, rows, rollout)
    mask = rollout.completion_mask.float()
    nan = torch.full_like(mask, math.nan)
    return Batch(rows=rows, group_size=cfg.group_size, rollout=rollout, mask=mask, scores=scores, totals=totals,
                 old_logp=nan, entropy=nan.clone(), ref_logp=None)


def with_logprobs(c, batch: Batch, policy: bool = True) -> Batch:
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


def collect_batch(c, step: int, policy_logprobs: bool = True) -> Batch:
    """Sample G completions per prompt from the current policy (pi_old), score them, and take
    pi_old's (unless policy_logprobs is False) and the reference's log-probabilities once, before
    any update. With several processes, this process's share of the step's prompts."""
    rows = c.dist.share(c.task.batch(step, c.cfg.prompts_per_step, c.cfg.seed))
    return with_logprobs(c, sample_groups(c, rows), policy=policy_logprobs)


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
        generation_s=sum(p.rollout.generation_s for p in parts))
    names = list(parts[0].scores.per_reward)
    scores = rewards.Scores(total=[v for p in parts for v in p.scores.total],
                            per_reward={k: [v for p in parts for v in p.scores.per_reward[k]] for k in names},
                            errors={k: sum(p.scores.errors.get(k, 0) for p in parts) for k in names})
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


def collect_with_signal(c, step: int) -> DynamicBatch:
    """DAPO's dynamic sampling (Yu et al., "DAPO", 2025, arXiv:2503.14476, section 3.2).

    A group whose rewards are all equal has advantages 0: it costs its sampling and teaches
    nothing. Drop such groups, and sample more prompts in their place until `prompts_per_step`
    groups have a spread, or `dynamic_sampling_rounds` extra rounds have been sampled; the step
    then trains on the groups with a spread it has (possibly none: no update). Each extra round
    draws only as many prompts as are missing, so no group with a spread is ever thrown away.
    """
    cfg = c.cfg
    rows = c.task.batch(step, cfg.prompts_per_step, cfg.seed)
    kept, dropped, seen, rounds, errors = [], [], set(), 0, {}
    while rows:
        got = sample_groups(c, rows)
        rounds += 1
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
    # failures counted per round: once each, wherever its group went
    sampled = replace(sampled, scores=rewards.Scores(sampled.scores.total, sampled.scores.per_reward, errors))
    return DynamicBatch(kept=kept_batch, dropped=dropped_batch, sampled=sampled, rounds=rounds)


def minibatch_indices(batch: int, minibatches: int) -> list[torch.Tensor]:
    """Row indices of each minibatch of one pass: the whole batch, or a fresh shuffle cut in pieces."""
    order = torch.randperm(batch) if minibatches > 1 else torch.arange(batch)
    return [chunk for chunk in order.chunk(minibatches) if chunk.numel()]
