"""Turn one step's tensors into rows of the run directory's tables (see docs/run-directory.md).

Kept apart from the algorithm loops so GRPO and PPO log the same columns the same way.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from grpo_lab.trainer.doctor import repetitive
from grpo_lab.trainer.timing import rank_scalars, rank_seconds

if TYPE_CHECKING:  # setup.py imports this module: the type alone, no cycle
    from grpo_lab.trainer.setup import Components

# Fixed ratio histogram bins: 40 bins over [0.5, 1.5]; values beyond fall into the end bins.
RATIO_EDGES = torch.linspace(0.5, 1.5, 41)


def _stats(prefix: str, values: torch.Tensor) -> dict[str, float]:
    values = values[~torch.isnan(values)].double()
    if values.numel() == 0:
        return {f"{prefix}/{k}": math.nan for k in ("mean", "std", "min", "max")}
    return {
        f"{prefix}/mean": values.mean().item(),
        f"{prefix}/std": values.std(unbiased=False).item(),
        f"{prefix}/min": values.min().item(),
        f"{prefix}/max": values.max().item(),
    }


def reward_scalars(totals: torch.Tensor, per_reward: dict[str, list[float | None]],
                   errors: dict[str, int], frac_zero_std: float, advantages: torch.Tensor,
                   logged: dict[str, list[float]] | None = None) -> dict[str, float]:
    """reward/*, rewards/<fn>/*, advantage/*, groups/frac_zero_std, and rewards/log/<name>: the
    mean of what the rewards logged with log_metric this step (TRL averages them the same way)."""
    out = _stats("reward", totals)
    for name, scores in per_reward.items():
        t = torch.tensor([math.nan if s is None else s for s in scores], dtype=torch.float64)
        out.update(_stats(f"rewards/{name}", t))
        out[f"rewards/{name}/none_frac"] = float(torch.isnan(t).double().mean())
        out[f"rewards/{name}/errors"] = float(errors.get(name, 0))
    out.update(_stats("advantage", advantages))
    out["groups/frac_zero_std"] = frac_zero_std
    for name, values in (logged or {}).items():
        out[f"rewards/log/{name}"] = sum(values) / len(values) if values else math.nan
    return out


@dataclass
class TokenStats:
    """Per-token figures accumulated over every optimisation pass of one step."""

    ratios: list[torch.Tensor] = field(default_factory=list)
    kls: list[torch.Tensor] = field(default_factory=list)
    clipped_low: int = 0
    clipped_high: int = 0
    tokens: int = 0

    def add(self, ratio: torch.Tensor, kl: torch.Tensor, low: torch.Tensor, high: torch.Tensor,
            mask: torch.Tensor) -> None:
        real = mask.bool()
        self.ratios.append(ratio.detach()[real].float().cpu())
        self.kls.append(kl.detach()[real].float().cpu())
        self.clipped_low += int((low & real).sum())
        self.clipped_high += int((high & real).sum())
        self.tokens += int(real.sum())

    def scalars(self) -> dict[str, float]:
        ratios = torch.cat(self.ratios)
        n = max(self.tokens, 1)
        return {
            "clip/low": self.clipped_low / n,
            "clip/high": self.clipped_high / n,
            "clip/total": (self.clipped_low + self.clipped_high) / n,
            "ratio/mean": ratios.mean().item(),
            "ratio/min": ratios.min().item(),
            "ratio/max": ratios.max().item(),
            "kl/mean": torch.cat(self.kls).mean().item(),
        }

    def histogram(self, step: int, low: float, high: float) -> dict[str, list]:
        """The step's ratio histogram and its clip range (low, high), as the config gave it."""
        ratios = torch.cat(self.ratios).clamp(RATIO_EDGES[0], RATIO_EDGES[-1] - 1e-6)
        counts = torch.histc(ratios, bins=len(RATIO_EDGES) - 1, min=float(RATIO_EDGES[0]), max=float(RATIO_EDGES[-1]))
        return {
            "step": [step],
            "edges": [RATIO_EDGES.tolist()],
            "counts": [counts.long().tolist()],
            "tokens": [self.tokens],
            "clipped_low": [self.clipped_low],
            "clipped_high": [self.clipped_high],
            "clip_low_bound": [low],
            "clip_high_bound": [high],
        }


@dataclass
class LastPass:
    """Per-token values of the last optimisation pass (each (B, T)): what the samples and tokens
    tables show for each completion once the step is done."""

    logp_new: torch.Tensor
    ratio: torch.Tensor
    kl: torch.Tensor
    clipped_low: torch.Tensor
    clipped_high: torch.Tensor

    @classmethod
    def like(cls, old_logp: torch.Tensor) -> "LastPass":
        zeros, no = torch.zeros_like(old_logp), torch.zeros_like(old_logp, dtype=torch.bool)
        return cls(logp_new=zeros.clone(), ratio=zeros.clone(), kl=zeros.clone(), clipped_low=no.clone(),
                   clipped_high=no.clone())

    def record(self, idx: torch.Tensor, *, logp: torch.Tensor, ratio: torch.Tensor, kl: torch.Tensor,
               clipped_low: torch.Tensor, clipped_high: torch.Tensor) -> None:
        self.logp_new[idx], self.ratio[idx], self.kl[idx] = logp.detach(), ratio.detach(), kl.detach()
        self.clipped_low[idx], self.clipped_high[idx] = clipped_low, clipped_high


@dataclass
class Updates:
    """What each optimizer update of a step logs, in update order (every minibatch of every pass);
    losses already scaled as the update minimised them."""

    losses: list[float] = field(default_factory=list)
    policy_losses: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)

    def add(self, loss: float, policy_loss: float, grad_norm: float) -> None:
        self.losses.append(loss)
        self.policy_losses.append(policy_loss)
        self.grad_norms.append(grad_norm)


def step_scalars(c: Components, batch, stats: TokenStats, updates: Updates, *, advantages: torch.Tensor,
                 frac_zero_std: float, start: float) -> dict[str, float]:
    """The scalars GRPO and PPO both log (docs/run-directory.md); `advantages` one per logged value."""
    ranks = None  # several processes: every rank's generation and update seconds, for the slowest and the mean
    policy_losses, losses, grad_norms = updates.policy_losses, updates.losses, updates.grad_norms
    if c.dist.active:  # several processes: rank 0 computes each figure over every rank's completions
        g = c.dist.gather_step(batch=batch, stats=stats, advantages=advantages, frac_zero_std=frac_zero_std,
                               policy_losses=policy_losses, losses=losses, rank_seconds=rank_seconds(c.timer))
        batch, stats, advantages, frac_zero_std = g["batch"], g["stats"], g["advantages"], g["frac_zero_std"]
        policy_losses, losses, ranks = g["policy_losses"], g["losses"], g["rank_seconds"]
    rollout, mask = batch.rollout, batch.mask
    step_s = time.perf_counter() - start
    metrics = reward_scalars(batch.totals, batch.scores.per_reward, batch.scores.errors, frac_zero_std, advantages,
                             batch.scores.logged)
    if stats.tokens:  # a step that trained (dynamic sampling may leave nothing to train on: no update)
        metrics.update(stats.scalars())
        metrics.update({
            "loss/policy": sum(policy_losses) / len(policy_losses),
            "loss/total": sum(losses) / len(losses),
            "grad/norm": sum(grad_norms) / len(grad_norms),
        })
    metrics.update({
        "entropy/mean": float((batch.entropy * mask).sum() / mask.sum().clamp(min=1)),
        "lr": c.optimizer.param_groups[0]["lr"],
        "completion/length_mean": rollout.lengths.float().mean().item(),
        "completion/length_max": rollout.lengths.max().item(),
        "completion/truncated_frac": rollout.truncated.float().mean().item(),
        "completion/repetitive_frac": sum(map(repetitive, rollout.completions)) / len(rollout.completions),
        "time/step_s": step_s,
        "perf/tokens_per_s": int(mask.sum()) / step_s,
    })
    metrics.update(tool_scalars(rollout.turns))
    if ranks is not None:  # one process: time/generation_s and time/update_s are its only rank's already
        metrics.update(rank_scalars(ranks))
    return metrics


def tool_calls(turns: list[dict]) -> tuple[int, int]:
    """(tool calls run, of which errors) in one completion's turns (multiturn.py)."""
    ran = [t for t in turns if "tool" in t]
    return len(ran), sum(t.get("error") is not None for t in ran)


def tool_scalars(turns: list[list[dict]] | None) -> dict[str, float]:
    """tools/* scalars (rundir/metrics.py 'tools'); none for a rollout without tools (turns None)."""
    if turns is None:
        return {}
    counts = [tool_calls(t) for t in turns]
    calls, errors = sum(c for c, _ in counts), sum(e for _, e in counts)
    n = max(len(turns), 1)
    return {"tools/calls_per_rollout": calls / n, "tools/error_frac": errors / calls if calls else 0.0,
            "tools/turns_per_rollout": sum(len(t) for t in turns) / n,
            # tools run one after another inside generation: their seconds are a part of time/generation_s
            "time/tools_s": sum(t.get("seconds") or 0.0 for row in turns for t in row)}


def log_step_tables(c: Components, step: int, batch, stats: TokenStats, last: LastPass, *, advantages: torch.Tensor,
                    per_token: dict[str, torch.Tensor], dropped=None) -> None:
    """samples, histograms and tokens rows of one step (logging level full only).

    advantages: one per completion (B,); per_token: (B, T) columns the tokens table adds to the
    last pass's (GRPO: the advantage; PPO: also value, return, token reward). dropped: the groups
    dynamic sampling left out (a Batch), logged after the trained ones with `dropped` true."""
    with c.timer.phase("log"):
        _log_tables(c, step, batch, stats, last, advantages=advantages, per_token=per_token, dropped=dropped)


def _log_tables(c: Components, step, batch, stats, last, *, advantages, per_token, dropped) -> None:
    if c.writer.level != "full":
        return
    if c.dist.active:  # several processes: rank 0 writes every rank's rows, groups numbered in rank order
        g = c.dist.gather_step(batch=batch, stats=stats, last=last, advantages=advantages, per_token=per_token)
        if not c.dist.writer:
            return
        batch, stats, last, advantages, per_token = g["batch"], g["stats"], g["last"], g["advantages"], g["per_token"]
    cfg = c.cfg
    if batch.rows:
        c.writer.log("samples", sample_rows(step, batch, advantages=advantages, last=last, extra_kinds=c.extra_kinds))
    if dropped is not None and dropped.rows:
        nan, no = torch.full_like(dropped.mask, math.nan), torch.zeros_like(dropped.mask, dtype=torch.bool)
        c.writer.log("samples", sample_rows(
            step, dropped, advantages=torch.zeros(len(dropped.rollout.completions)), group_offset=len(batch.rows),
            dropped=True, last=LastPass(logp_new=nan, ratio=nan, kl=nan, clipped_low=no, clipped_high=no),
            extra_kinds=c.extra_kinds))
    if not stats.tokens:
        return
    histogram = stats.histogram(step, *cfg.clip_range)
    c.writer.log("histograms", {**histogram, "importance_level": [getattr(cfg, "importance_level", "token")]})
    which = list(range(min(cfg.token_detail_groups, len(batch.rows)) * cfg.group_size))
    if which:
        ref = batch.ref_logp if batch.ref_logp is not None else torch.full_like(batch.old_logp, float("nan"))
        columns = {"logp_new": last.logp_new, "logp_old": batch.old_logp, "logp_ref": ref, "ratio": last.ratio,
                   "kl": last.kl, "clipped_low": last.clipped_low, "clipped_high": last.clipped_high, **per_token}
        c.writer.log("tokens", token_rows(step, batch, which, c.tokenizer, columns))


# The dataset's reference answer, by the names datasets give it (TRL's `solution`, verl's `ground_truth`).
REFERENCE_COLUMNS = ("answer", "solution", "ground_truth")


def reference(row: dict) -> str | None:
    """The row's reference answer as text: its first non-null REFERENCE_COLUMNS value."""
    value = next((row[k] for k in REFERENCE_COLUMNS if row.get(k) is not None), None)
    return None if value is None else str(value)


def extra_columns(extra: dict[str, list], kinds: dict[str, str]) -> dict[str, list]:
    """What the rewards logged with log_extra, as `extra/<column>` columns of tables/samples.

    A column's type is fixed the first time it appears in the run (`kinds`, kept across steps):
    numbers while every value is a number, else text; so every part file agrees on it."""
    out = {}
    for column, values in extra.items():
        numeric = all(v is None or isinstance(v, float) for v in values)
        kind = kinds.setdefault(column, "number" if numeric else "text")
        if kind == "number":
            out[f"extra/{column}"] = [v if isinstance(v, float) else _number(v) for v in values]
        else:
            out[f"extra/{column}"] = [None if v is None else (f"{v:g}" if isinstance(v, float) else str(v))
                                      for v in values]
    return out


def _number(value) -> float | None:
    try:
        return None if value is None else float(value)
    except ValueError:  # text in a column that began as numbers: kept out rather than breaking the table
        return None


def sample_rows(step: int, batch, *, advantages: torch.Tensor, last: LastPass, group_offset: int = 0,
                dropped: bool = False, extra_kinds: dict[str, str] | None = None) -> dict[str, list]:
    """One row per completion. Completion i answers prompt batch.group_of(i): group group_offset + that of
    the step; `dropped`: dynamic sampling left these groups out of the update. extra_kinds: the
    run's log_extra column types so far (see `extra_columns`); updated."""
    G = batch.group_size
    n = len(batch.rollout.completions)
    m = batch.mask.float()
    denom = m.sum(dim=1).clamp(min=1)
    clipped = last.clipped_low | last.clipped_high
    cols: dict[str, list] = {
        "step": [step] * n,
        "group": [group_offset + batch.group_of(i) for i in range(n)],
        "prompt_id": [str(batch.row_of(i)["prompt_id"]) for i in range(n)],
        "sample_idx": [i % G for i in range(n)],
        "prompt": [batch.row_of(i)["prompt"] for i in range(n)],
        "completion": batch.rollout.completions,
        # the dataset's reference (answer, else solution, else ground_truth; null when it has none)
        "answer": [reference(batch.row_of(i)) for i in range(n)],
        "reward": [None if math.isnan(r) else r for r in batch.totals.tolist()],
        "advantage": advantages.tolist(),
    }
    for name, scores in batch.scores.per_reward.items():
        cols[f"rewards/{name}"] = list(scores)
    cols.update({
        "length": batch.rollout.lengths.tolist(),
        "truncated": batch.rollout.truncated.tolist(),
        "ratio_mean": ((last.ratio * m).sum(dim=1) / denom).tolist(),
        "clip_frac": ((clipped.float() * m).sum(dim=1) / denom).tolist(),
        "kl_mean": ((last.kl * m).sum(dim=1) / denom).tolist(),
        "dropped": [dropped] * n,
    })
    if batch.rollout.turns is not None:  # a run with tools: each completion's turns (docs/run-directory.md)
        counts = [tool_calls(t) for t in batch.rollout.turns]
        cols.update({"tool_calls": [c for c, _ in counts], "tool_errors": [e for _, e in counts],
                     "turns": [json.dumps(t, default=str) for t in batch.rollout.turns]})
    cols.update(extra_columns(batch.scores.extra, {} if extra_kinds is None else extra_kinds))
    return cols


def token_rows(step: int, batch, which: list[int], tokenizer, per_token: dict[str, torch.Tensor]) -> dict[str, list]:
    """One row per completion token for the completions in `which`; per_token holds (B, T) tensors."""
    G = batch.group_size
    ids_all, mask = batch.rollout.completion_ids, batch.rollout.completion_mask
    cols: dict[str, list] = {k: [] for k in ("step", "group", "prompt_id", "sample_idx", "position", "token",
                                             *per_token)}
    for i in which:
        n = int(mask[i].sum())
        ids = ids_all[i, :n].tolist()
        cols["step"] += [step] * n
        cols["group"] += [batch.group_of(i)] * n
        cols["prompt_id"] += [str(batch.row_of(i)["prompt_id"])] * n
        cols["sample_idx"] += [i % G] * n
        cols["position"] += list(range(n))
        cols["token"] += tokenizer.convert_ids_to_tokens(ids)
        for k, t in per_token.items():
            cols[k] += t[i, :n].tolist()
    cols["clipped"] = [bool(a or b) for a, b in zip(cols["clipped_low"], cols["clipped_high"])]
    if batch.rollout.tool_mask is not None:  # a run with tools: who wrote each token (tool tokens have no loss)
        cols["source"] = [("tool" if int(batch.rollout.tool_mask[i, p]) else "model")
                          for i in which for p in range(int(mask[i].sum()))]
    return cols
