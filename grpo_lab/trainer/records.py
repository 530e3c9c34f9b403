"""Stage 6 of a step: its tensors as rows of the run directory's tables (see docs/run-directory.md).

Kept apart from the algorithm loops so GRPO and PPO log the same columns the same way.
"""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING

import torch

from grpo_lab.objective import mismatch
from grpo_lab.objective.functions import masked_mean
from grpo_lab.rundir import metrics
from grpo_lab.rundir.metrics import named  # also the step functions' (grpo.py, ppo.py)
from grpo_lab.tools import environments as env_rules
from grpo_lab.trainer.data import REFERENCE_COLUMNS
from grpo_lab.trainer import lens, step_records
from grpo_lab.trainer.doctor import repetitive
from grpo_lab.trainer.timing import rank_scalars, rank_seconds
from grpo_lab.trainer.updates import LastPass, TokenStats, Updates

if TYPE_CHECKING:  # the type alone: Components is built by run.py's prepare
    from grpo_lab.trainer.components import Components

# Fixed ratio histogram bins: 40 bins over [0.5, 1.5]; values beyond fall into the end bins.
RATIO_EDGES = torch.linspace(0.5, 1.5, 41)


def row_names(first: str, fn: str | None = None) -> list[str]:
    """The names of the registry row that holds `first` (a row: names that share a unit and a meaning)."""
    return [named(n, fn) for n in metrics.ROWS[named(first)].names]


def _stats(row: str, values: torch.Tensor, fn: str | None = None) -> dict[str, float]:
    """mean, std (1/N), min and max of the non-NaN values, under the names of the registry row `row`."""
    values = values[~torch.isnan(values)].double()
    figures = ({k: math.nan for k in ("mean", "std", "min", "max")} if values.numel() == 0 else
               {"mean": values.mean().item(), "std": values.std(unbiased=False).item(),
                "min": values.min().item(), "max": values.max().item()})
    return {name: figures[name.rsplit("/", 1)[1]] for name in row_names(row, fn)}


def reward_scalars(totals: torch.Tensor, per_reward: dict[str, list[float | None]],
                   errors: dict[str, int], frac_zero_std: float, advantages: torch.Tensor,
                   logged: dict[str, list[float]] | None = None) -> dict[str, float]:
    """reward/*, rewards/<fn>/*, advantage/*, groups/frac_zero_std, and rewards/log/<name>: the
    mean of what the rewards logged with log_metric this step (TRL averages them the same way)."""
    out = _stats("reward/mean", totals)
    for name, scores in per_reward.items():
        t = torch.tensor([math.nan if s is None else s for s in scores], dtype=torch.float64)
        out.update(_stats("rewards/<fn>/mean", t, name))
        out[named("rewards/<fn>/none_frac", name)] = float(torch.isnan(t).double().mean())
        out[named("rewards/<fn>/errors", name)] = float(errors.get(name, 0))
    out.update(_stats("advantage/mean", advantages))
    out[named("groups/frac_zero_std")] = frac_zero_std
    for name, values in (logged or {}).items():
        out[named("rewards/log/<name>").replace("<name>", name)] = sum(values) / len(values) if values else math.nan
    return out


def rewarded_truncated_frac(totals: torch.Tensor, truncated: torch.Tensor, group_size: int) -> float:
    """The share of the step's completions cut at max_new_tokens yet scored above their group's
    mean (a positive GRPO advantage): the update makes those cut-off texts more likely.

    totals (B,) and truncated (B,) hold each group's G completions one after the other; an
    unscored (NaN) or non-finite completion is never above the mean and leaves it alone (a step with
    an infinite reward trains nothing: the guard skips its update and says so itself).

    >>> rewarded_truncated_frac(torch.tensor([1., 0., 0., 0., 1., 1.]), torch.tensor([1, 0, 0, 1, 1, 0]).bool(), 3)
    0.3333333333333333
    >>> rewarded_truncated_frac(torch.tensor([float("inf"), 0., 1.]), torch.tensor([1, 0, 0]).bool(), 3)
    0.0
    """
    totals = totals.double()
    by_group = torch.where(torch.isfinite(totals), totals, torch.nan).view(-1, group_size)
    above = by_group > by_group.nanmean(dim=1, keepdim=True)
    return (above.flatten() & truncated.bool()).double().mean().item()


def token_scalars(stats: TokenStats) -> dict[str, float]:
    """clip/*, ratio/* and kl/mean of a step that trained, over every pass's tokens."""
    ratios = torch.cat(stats.ratios)
    n = max(stats.tokens, 1)
    ratio = {"mean": ratios.mean().item(), "min": ratios.min().item(), "max": ratios.max().item()}
    return {
        named("clip/low"): stats.clipped_low / n,
        named("clip/high"): stats.clipped_high / n,
        named("clip/total"): (stats.clipped_low + stats.clipped_high) / n,
        **{name: ratio[name.rsplit("/", 1)[1]] for name in row_names("ratio/mean")},
        named("kl/mean"): torch.cat(stats.kls).mean().item(),
    }


def ratio_histogram(stats: TokenStats, step: int, low: float, high: float) -> dict[str, list]:
    """The step's ratio histogram and its clip range (low, high), as the config gave it."""
    ratios = torch.cat(stats.ratios).clamp(RATIO_EDGES[0], RATIO_EDGES[-1] - 1e-6)
    counts = torch.histc(ratios, bins=len(RATIO_EDGES) - 1, min=float(RATIO_EDGES[0]), max=float(RATIO_EDGES[-1]))
    return {
        "step": [step],
        "edges": [RATIO_EDGES.tolist()],
        "counts": [counts.long().tolist()],
        "tokens": [stats.tokens],
        "clipped_low": [stats.clipped_low],
        "clipped_high": [stats.clipped_high],
        "clip_low_bound": [low],
        "clip_high_bound": [high],
    }


def step_scalars(c: Components, batch, stats: TokenStats, updates: Updates, *, advantages: torch.Tensor,
                 frac_zero_std: float, start: float, trained=None) -> dict[str, float]:
    """The scalars GRPO and PPO both log (docs/run-directory.md); `advantages` one per logged value.
    `trained`: the groups the updates trained on where that is not all of `batch` (dynamic sampling,
    one process only); pi_old's entropy is theirs, as the dropped groups had no forward pass."""
    ranks = None  # several processes: every rank's generation and update seconds, for the slowest and the mean
    policy_losses, losses, grad_norms = updates.policy_losses, updates.losses, updates.grad_norms
    if c.dist.active:  # several processes: rank 0 computes each figure over every rank's completions
        g = step_records.gather(c.dist, step_records.ScalarPieces(
            batch=batch, stats=stats, advantages=advantages, frac_zero_std=frac_zero_std,
            policy_losses=policy_losses, losses=losses, rank_seconds=rank_seconds(c.timer)))
        batch, stats, advantages, frac_zero_std = g.batch, g.stats, g.advantages, g.frac_zero_std
        policy_losses, losses, ranks = g.policy_losses, g.losses, g.rank_seconds
    trained = batch if trained is None else trained
    rollout, mask = batch.rollout, batch.mask
    step_s = time.perf_counter() - start
    metrics = reward_scalars(batch.totals, batch.scores.per_reward, batch.scores.errors, frac_zero_std, advantages,
                             batch.scores.logged)
    if stats.tokens:  # a step that trained (dynamic sampling may leave nothing to train on: no update)
        metrics.update(token_scalars(stats))
        if c.reference is None:  # beta 0: no reference model, so no KL was measured: absent, never 0
            metrics.pop(named("kl/mean"))
        metrics.update({
            named("loss/policy"): sum(policy_losses) / len(policy_losses),
            named("loss/total"): sum(losses) / len(losses),
            named("grad/norm"): sum(grad_norms) / len(grad_norms),
        })
    if trained.rows:  # dynamic sampling may leave no group to train on: no forward pass, no entropy
        metrics[named("entropy/mean")] = float(masked_mean(trained.entropy, trained.mask))
    metrics.update({
        named("lr"): c.optimizer.param_groups[0]["lr"],
        named("completion/length_mean"): rollout.lengths.float().mean().item(),
        named("completion/length_max"): rollout.lengths.max().item(),
        named("completion/truncated_frac"): rollout.truncated.float().mean().item(),
        named("completion/truncated_rewarded_frac"): rewarded_truncated_frac(batch.totals, rollout.truncated,
                                                                             batch.group_size),
        named("completion/repetitive_frac"): sum(map(repetitive, rollout.completions)) / len(rollout.completions),
        named("time/step_s"): step_s,
        named("perf/tokens_per_s"): int(mask.sum()) / step_s,
    })
    metrics.update(tool_scalars(rollout.turns))
    metrics.update(mismatch_scalars(c.cfg, batch))
    metrics.update(lens.step_scalars(batch, lens.weights_of(c.reward_fns), references(batch)))  # is the reward honest?
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
    return {named("tools/calls_per_rollout"): calls / n, named("tools/error_frac"): errors / calls if calls else 0.0,
            named("tools/turns_per_rollout"): sum(len(t) for t in turns) / n,
            # tools run one after another inside generation: their seconds are a part of time/generation_s
            named("time/tools_s"): sum(t.get("seconds") or 0.0 for row in turns for t in row)}


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
        g = step_records.gather(c.dist, step_records.TablePieces(batch=batch, stats=stats, last=last,
                                                                 advantages=advantages, per_token=per_token))
        if not c.dist.writer:
            return
        batch, stats, last, advantages, per_token = g.batch, g.stats, g.last, g.advantages, g.per_token
    cfg = c.cfg
    has_kl = c.reference is not None  # beta 0: no reference, no KL (null, not 0)
    if batch.rows:  # a step whose update was skipped (updates.py's guard) has no last pass: null figures
        c.writer.log("samples", sample_rows(step, batch, advantages=advantages, has_kl=has_kl, extra_kinds=c.extra_kinds,
                                            weights=lens.weights_of(c.reward_fns),
                                            last=last if stats.tokens else LastPass.unrecorded(batch.mask)))
    if dropped is not None and dropped.rows:
        c.writer.log("samples", sample_rows(
            step, dropped, advantages=torch.zeros(len(dropped.rollout.completions)), group_offset=len(batch.rows),
            dropped=True, last=LastPass.unrecorded(dropped.mask), has_kl=has_kl, extra_kinds=c.extra_kinds,
            weights=lens.weights_of(c.reward_fns)))
    if not stats.tokens:
        return
    histogram = ratio_histogram(stats, step, *cfg.clip_range)
    c.writer.log("histograms", {**histogram, "importance_level": [getattr(cfg, "importance_level", "token")]})
    groups = detail_groups(cfg.token_detail_groups, cfg.group_size, kl_sum=last.kl_sum, ratio_peak=last.ratio_peak)
    which = [g * cfg.group_size + j for g in groups for j in range(cfg.group_size)]
    if which:
        ref = batch.ref_logp if batch.ref_logp is not None else torch.full_like(batch.old_logp, float("nan"))
        columns = {"logp_new": last.logp_new, "logp_old": batch.old_logp, "logp_ref": ref, "ratio": last.ratio,
                   "kl": last.kl, "clipped_low": last.clipped_low, "clipped_high": last.clipped_high, **per_token}
        if batch.rollout.sampler_logp is not None:  # optional: a rollout with tools, or joined rounds, has none
            columns["logp_sampler"] = batch.rollout.sampler_logp
        c.writer.log("tokens", token_rows(step, batch, which, c.tokenizer, columns))


def detail_groups(n: int, group_size: int, *, kl_sum: torch.Tensor, ratio_peak: torch.Tensor) -> list[int]:
    """The groups whose tokens are logged: the first n, the n carrying most of the step's KL and the n
    with the largest ratio, so the group a kl_explosion or ratio_explosion finding (and Groups' KL
    and ratio orderings) points to first can be read token by token. kl_sum, ratio_peak: (B,) per
    completion over every pass (LastPass); a NaN (no reference, a row no pass reached) ranks last.

    >>> detail_groups(1, 2, kl_sum=torch.tensor([0., 1., 9., 9., 0., 0.]), ratio_peak=torch.tensor([1., 1., 1., 1., 1., 7.]))
    [0, 1, 2]
    >>> detail_groups(0, 2, kl_sum=torch.ones(4), ratio_peak=torch.ones(4))
    []
    """
    n_groups = kl_sum.shape[0] // group_size
    n = min(n, n_groups)
    if n == 0:
        return []
    kl = torch.nan_to_num(kl_sum.double().view(n_groups, group_size), nan=0.0).sum(dim=1)
    ratio = torch.nan_to_num(ratio_peak.double().view(n_groups, group_size), nan=-math.inf).amax(dim=1)
    picked = set(range(n)) | set(kl.topk(n).indices.tolist()) | set(ratio.topk(n).indices.tolist())
    return sorted(picked)


def reference(row: dict) -> str | None:
    """The row's reference answer as text: its first non-null REFERENCE_COLUMNS value."""
    value = next((row[k] for k in REFERENCE_COLUMNS if row.get(k) is not None), None)
    return None if value is None else str(value)


def references(batch) -> list[str | None]:
    """Each completion's reference answer (`reference` of the row it answers)."""
    return [reference(batch.row_of(i)) for i in range(len(batch.rollout.completions))]


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


def _nulls(values: torch.Tensor) -> list[float | None]:
    """A per-sample figure as the samples table stores it: null where there is none (NaN, -inf)."""
    return [v if math.isfinite(v) else None for v in values.tolist()]


def mismatch_scalars(cfg, batch) -> dict[str, float]:
    """mismatch/*: the sampler's own log-probs against pi_old's forward, and the correction's weights
    (objective/mismatch.py), over every process's completions; none where the rollout has no sampler
    log-probs (multi-turn rollouts with tools: the registry's 'sampler' table is not theirs)."""
    sampler = batch.rollout.sampler_logp
    if sampler is None or batch.old_logp is None:
        return {}
    applied = mismatch.weights(batch.old_logp, sampler, batch.mask, cfg.mismatch_correction,  # PPO: "none"
                               cfg.mismatch_cap, cfg.mismatch_cap_min or None)
    return {named(f"mismatch/{n}"): v for n, v in mismatch.figures(batch.old_logp, sampler, batch.mask, applied).items()}


def sample_figures(batch, last: LastPass, has_kl: bool) -> dict[str, list]:
    """Each completion's figures from its loss tokens over every pass of the step (the Groups page orders
    a step's groups by them), so they add back to the step's scalars: weighted by length, kl_mean gives
    kl/mean, ratio_mean ratio/mean, entropy_mean entropy/mean (pi_old's: one forward); clipped_tokens
    summed over completions is clip/total's count over every pass (clip_frac its share of that
    completion's tokens over every pass); ratio_max's largest is ratio/max. kl_mean is null without a
    reference; every figure but entropy_mean is null where the completion had no pass. The last pass
    alone stays in the tokens table (ratio, kl, clipped_* per token)."""
    m = batch.mask.bool()
    counted = m.sum(dim=1).float()
    recorded = (last.passes > 0) & (counted > 0)  # dropped groups, a skipped update: none
    seen = (last.passes.float() * counted).clamp(min=1)  # the completion's tokens over every pass
    none = torch.full_like(counted, math.nan)
    entropy = torch.where(m, batch.entropy.float(), torch.zeros_like(batch.entropy, dtype=torch.float)).sum(dim=1)
    return {
        "kl_mean": _nulls(torch.where(recorded, last.kl_sum / seen, none)) if has_kl else [None] * len(counted),
        "clipped_tokens": [int(v) if ok else None for v, ok in zip(last.clipped.tolist(), recorded.tolist())],
        "clip_frac": _nulls(torch.where(recorded, last.clipped.float() / seen, none)),
        "ratio_mean": _nulls(torch.where(recorded, last.ratio_sum / seen, none)),
        "entropy_mean": _nulls(torch.where(counted > 0, entropy / counted.clamp(min=1), none)),
        "ratio_max": _nulls(torch.where(recorded, last.ratio_peak, none)),
    }


def sample_rows(step: int, batch, *, advantages: torch.Tensor, last: LastPass, group_offset: int = 0,
                dropped: bool = False, has_kl: bool = True, extra_kinds: dict[str, str] | None = None,
                weights: dict[str, float] | None = None) -> dict[str, list]:
    """One row per completion. Completion i answers prompt batch.group_of(i): group group_offset + that of
    the step; `dropped`: dynamic sampling left these groups out of the update; has_kl: the run has a
    reference (beta > 0). extra_kinds: the run's log_extra column types so far (see `extra_columns`); updated.
    weights: the rewards' weights, for the lens's decided_by (trainer/lens.py; default 1 each)."""
    G = batch.group_size
    n = len(batch.rollout.completions)
    figures = sample_figures(batch, last, has_kl)
    cols: dict[str, list] = {
        "step": [step] * n,
        "group": [group_offset + batch.group_of(i) for i in range(n)],
        "prompt_id": [str(batch.row_of(i)["prompt_id"]) for i in range(n)],
        "sample_idx": [i % G for i in range(n)],
        # what the model saw: with an environment, the prompt its reset's observation was rendered into
        "prompt": env_rules.texts_seen(batch.rollout.environments, [batch.row_of(i)["prompt"] for i in range(n)]),
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
        "ratio_mean": figures["ratio_mean"],
        "clip_frac": figures["clip_frac"],
        "kl_mean": figures["kl_mean"],
        "dropped": [dropped] * n,
        "clipped_tokens": figures["clipped_tokens"],
        "entropy_mean": figures["entropy_mean"],
        "ratio_max": figures["ratio_max"],
        # mean |log pi_old - log pi_sampler| over its tokens: where the sampler and the trainer disagree
        "mismatch_mean": ([None] * n if batch.rollout.sampler_logp is None or batch.old_logp is None else
                          _nulls(mismatch.per_completion(batch.old_logp, batch.rollout.sampler_logp, batch.mask))),
    })
    # the reward-hacking lens: which reward decided the advantage's sign, the strict check's verdict
    cols.update(lens.sample_columns(batch, weights or dict.fromkeys(batch.scores.per_reward, 1.0), references(batch)))
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
