"""Which groups of a step made a curve move: the orderings Groups offers, and which curve opens which.

A point on a Live curve (a step) opens Groups at that step with its groups ordered by their share of
that curve's metric. ORDERS is the one declaration: each ordering, the registered scalar names
(rundir/metrics.py) whose curves open it, and the format its figure is said in; how a group's figure
is read from the run's tables is the SQL below (figure_exprs, MASS, TOKEN_FIGURES), here only.
FINDING_METRICS names the scalar behind each run-doctor finding (trainer/doctor.py kinds), so a finding
opens the same ordering its curve would.

A group's figures come from one DuckDB aggregate over the step's sample rows (`figures_sql`); the
per-sample columns a run lacks (older runs, imports) are taken from the tokens table where the run
logged token detail (`token_figures_sql`, for the first token_detail_groups groups only), else the
ordering is not available for the run. No Streamlit here: the dashboard caches on top, the bench and
tests call it directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from grpo_lab.rundir import metrics as registry
from grpo_lab.rundir.honesty import VERIFIERS

GROUP = "group"  # the step's own order: group 0, 1, ... (no figure)


@dataclass(frozen=True)
class Order:
    key: str  # the address's `sort=`
    metrics: tuple[str, ...]  # registered scalar names whose curves open this ordering
    fmt: str  # a group's figure as the picker says it (a format spec)
    lowest_first: bool = False  # False: the largest share first


ORDERS: dict[str, Order] = {o.key: o for o in (
    Order("kl", ("kl/mean", "kl/approx", "kl/folded", "kl/penalty"), ".3g"),
    Order("clip", ("clip/low", "clip/high", "clip/total"), ".0f"),
    # zero-spread groups first: they are what a no-signal step, a flat advantage or a ~0 loss is made of
    Order("no_signal", ("groups/frac_zero_std", "advantage/mean", "advantage/std", "advantage/min", "advantage/max",
                        "reward/std", "loss/policy", "loss/total"), ".2f", lowest_first=True),
    Order("entropy", ("entropy/mean", "loss/entropy_bonus"), ".3g"),
    Order("ratio_max", ("ratio/min", "ratio/mean", "ratio/max"), ".3g"),
    Order("length", ("completion/length_mean", "completion/length_max", "completion/repetitive_frac"), ".1f"),
    Order("truncated", ("completion/truncated_frac",), ".0f"),
    Order("reward", ("reward/mean", "reward/min", "reward/max", "rewards/<fn>/mean", "rewards/<fn>/std",
                     "rewards/<fn>/min", "rewards/<fn>/max", "rewards/<fn>/none_frac", "rewards/<fn>/errors"), ".2f"),
    Order("tool_errors", ("tools/error_frac", "tools/calls_per_rollout", "tools/turns_per_rollout"), ".0f"),
    Order("mismatch", ("mismatch/logp_diff_mean", "mismatch/logp_diff_max", "mismatch/kl", "mismatch/ratio_mean",
                       "mismatch/ratio_min", "mismatch/ratio_max", "mismatch/out_frac", "mismatch/weight_mean",
                       "mismatch/weight_min", "mismatch/weight_max", "mismatch/masked_frac"), ".3g"),
)}
# The reward-hacking lens (rundir/honesty.py): groups whose high rewards the answer may not earn
ORDERS["suspects"] = Order("suspects", ("honesty/<fn>/sign_share", "honesty/<fn>/reward_share", "honesty/length_corr",
                                        "honesty/length_corr_trend", "honesty/strict_fail_frac", "honesty/strict_checked",
                                        "honesty/groups_all_solved", "honesty/groups_none_solved",
                                        "honesty/group_spread", "honesty/group_spread_ratio", "honesty/reward_gain",
                                        "honesty/eval_accuracy_gain"), ".1f")
SORTS = (GROUP, *ORDERS)  # what the Groups picker offers, in its order

# The scalar each run-doctor finding is about (docs/run-directory.md, tables/events). Kinds not here
# (non_finite: several at once; high_lr: a config fact) open Groups at their step in the step's order.
FINDING_METRICS = {
    "kl_explosion": "kl/mean", "ratio_explosion": "ratio/max", "grad_explosion": "grad/norm",
    "entropy_collapse": "entropy/mean", "entropy_explosion": "entropy/mean", "reward_constant": "reward/std",
    "no_signal": "groups/frac_zero_std", "all_truncated": "completion/truncated_frac",
    "rewarded_truncation": "completion/truncated_frac",
    "degenerate_text": "completion/repetitive_frac", "reward_failed": "reward/mean", "reward_unscored": "reward/mean",
    "ratings_missing": "reward/mean",
}

FINDING_METRICS.update({"reward_dominated_by": "honesty/<fn>/sign_share", "reward_tracks_length": "honesty/length_corr",
                        "strict_check_disagrees": "honesty/strict_fail_frac", "eval_diverges": "honesty/reward_gain",
                        "reward_collapse": "honesty/group_spread_ratio"})

_BY_METRIC = {name: o.key for o in ORDERS.values() for name in o.metrics}


def sort_for_metric(column: str) -> str | None:
    """The ordering a curve of scalars column `column` opens (None: none fits, the step's own order).

    >>> sort_for_metric("kl/mean"), sort_for_metric("rewards/correctness/mean"), sort_for_metric("grad/norm")
    ('kl', 'reward', None)
    """
    name = registry.registered_name(column)
    return _BY_METRIC.get(name) if name else None


def sort_for_panel(columns: tuple[str, ...] | list[str]) -> str | None:
    """The ordering a chart drawing `columns` opens: its first column that has one."""
    return next((s for c in columns if (s := sort_for_metric(c)) is not None), None)


def sort_for_finding(kind: str) -> str | None:
    """The ordering that shows a run-doctor finding's cause (None: the step's own order)."""
    metric = FINDING_METRICS.get(kind)
    return sort_for_metric(metric) if metric else None


# --- figures ----------------------------------------------------------------------------------


def _weighted(value: str, columns: set[str]) -> str:
    """The token-weighted group mean of a per-sample mean (`length` tokens each), else the plain mean."""
    if "length" not in columns:
        return f"avg({value})"
    return f"sum({value} * length) / nullif(sum(CASE WHEN {value} IS NOT NULL THEN length END), 0)"


def formatted_figure(sort: str, value: float) -> str:
    """A group's figure under ordering `sort` as the picker says it (ORDERS' format).

    >>> formatted_figure("kl", 0.012345), formatted_figure("clip", 3.0), formatted_figure("length", 41.26)
    ('0.0123', '3', '41.3')
    """
    return format(float(value), ORDERS[sort].fmt)


def figure_exprs(columns: set[str]) -> dict[str, str]:
    """SQL for each ordering's figure that the samples columns `columns` allow (key -> expression)."""
    out = {"reward": "avg(reward)", "no_signal": "stddev_pop(reward)"}
    if "kl_mean" in columns:
        out["kl"] = _weighted("kl_mean", columns)  # null when the run has no reference (beta 0)
    if "clipped_tokens" in columns:
        out["clip"] = "sum(clipped_tokens)"
    elif {"clip_frac", "length"} <= columns:  # before per-sample counts: the fraction times the length
        out["clip"] = "sum(round(clip_frac * length))"
    if "entropy_mean" in columns:
        out["entropy"] = _weighted("entropy_mean", columns)
    if "ratio_max" in columns:
        out["ratio_max"] = "max(ratio_max)"
    if "length" in columns:
        out["length"] = "avg(length)"
    if "truncated" in columns:
        out["truncated"] = "sum(truncated::INT)"
    if "tool_errors" in columns:
        out["tool_errors"] = "sum(tool_errors)"
    if "mismatch_mean" in columns:
        out["mismatch"] = _weighted("mismatch_mean", columns)
    if suspects := suspects_sql(columns):
        out["suspects"] = suspects
    return out


def suspects_sql(columns: set[str]) -> str | None:
    """A group's hacking-suspect figure (docs/reward-hacking.md): its pushed-up completions (A > 0) that
    fail the strict check, plus those whose sign a reward that does not check the answer decided, plus
    the within-group correlation of reward and length where positive. What a run lacks counts nothing
    (an import without the lens's columns: the length part alone, in characters); None without any of them.

    >>> suspects_sql({"advantage", "reward", "length"})[:45]
    'coalesce(CASE WHEN isnan(corr(reward, length)'
    >>> suspects_sql({"advantage", "reward", "completion"})[:57]
    'coalesce(CASE WHEN isnan(corr(reward, length(completion))'
    """
    parts = []
    if {"strict_pass", "advantage"} <= columns:
        parts.append("count(*) FILTER (WHERE advantage > 0 AND strict_pass = false)")
    if {"decided_by", "advantage"} <= columns:
        answer_checks = ", ".join(f"'{v}'" for v in VERIFIERS)
        parts.append(f"count(*) FILTER (WHERE advantage > 0 AND decided_by NOT IN ({answer_checks}))")
    # an import keeps no token counts: its completions' characters; corr is NaN, not null, when all are equal
    size = "length" if "length" in columns else "length(completion)" if "completion" in columns else None
    if size and "reward" in columns:
        corr = f"corr(reward, {size})"
        parts.append(f"coalesce(CASE WHEN isnan({corr}) THEN 0 ELSE greatest({corr}, 0) END, 0)")
    return " + ".join(parts) or None


# Each ordering's additive part of its step's scalar, per group ("<key>_mass"): the samples' figures add back
# to the step's scalars (docs/run-directory.md), so a group's mass over the step's is its share of the point
# clicked. key -> (the samples columns it needs, the per-sample SQL summed). ratio_max and reward have none
# (a maximum; rewards of either sign).
MASS = {"kl": ({"kl_mean", "length"}, "kl_mean * length"), "clip": ({"clipped_tokens"}, "clipped_tokens"),
        "entropy": ({"entropy_mean", "length"}, "entropy_mean * length"), "length": ({"length"}, "length"),
        "truncated": ({"truncated"}, "truncated::INT"), "tool_errors": ({"tool_errors"}, "tool_errors"),
        "mismatch": ({"mismatch_mean", "length"}, "mismatch_mean * length")}


def figures_sql(columns: set[str]) -> str:
    """One row per group of step `$step`: its prompt, size, whether it has signal (any A != 0), whether
    dynamic sampling dropped it, a column per ordering `figure_exprs` allows, and its MASS columns."""
    dropped = "bool_or(coalesce(dropped, false))" if "dropped" in columns else "false"
    signal = "coalesce(max(abs(advantage)), 0) > 0"
    figures = "".join(f", {sql} AS {key}" for key, sql in figure_exprs(columns).items())
    masses = "".join(f", sum({sql}) AS {key}_mass" for key, (needs, sql) in MASS.items() if needs <= columns)
    return (f'SELECT "group", any_value(prompt_id) AS prompt_id, count(*) AS size, '
            f"{signal} AS signal, {dropped} AS dropped{figures}{masses}, (NOT {signal})::INT AS no_signal_mass "
            'FROM {src} WHERE step = $step GROUP BY "group" ORDER BY "group"')


def carried(ranked: pd.DataFrame, sort: str, first: int) -> float | None:
    """The share of the step's figure `sort` that the first `first` groups of `ranked` carry (no_signal:
    of its groups without signal); None where the ordering has no additive figure or the step's is 0.

    >>> g = pd.DataFrame({"group": [2, 0, 1], "kl_mass": [3.0, 1.0, 0.0]})
    >>> carried(g, "kl", 1), carried(g, "ratio_max", 1)
    (0.75, None)
    """
    column = f"{sort}_mass"
    if column not in ranked:
        return None
    total = float(ranked[column].sum())
    if not total > 0:
        return None
    return float(ranked[column].head(first).sum()) / total


# The figures the tokens table also holds: key -> (the tokens column it needs, the SQL over a group's tokens).
TOKEN_FIGURES = {"kl": ("kl", "avg(kl)"), "clip": ("clipped", "sum(clipped::INT)"),
                 "ratio_max": ("ratio", "max(ratio)")}


def token_figures_sql(columns: set[str], missing: set[str]) -> str | None:
    """The figures in `missing` that the tokens table (columns `columns`) holds, per group of step `$step`;
    the policy's tokens only (a tool's result has no ratio, KL or clip)."""
    keys = [k for k, (needs, _sql) in TOKEN_FIGURES.items() if k in missing and needs in columns]
    if not keys:
        return None
    model = " AND source IS DISTINCT FROM 'tool'" if "source" in columns else ""
    figures = ", ".join(f"{TOKEN_FIGURES[k][1]} AS {k}" for k in keys)
    return f'SELECT "group", {figures} FROM {{src}} WHERE step = $step{model} GROUP BY "group"'


def merge_token_figures(groups: pd.DataFrame, tokens: pd.DataFrame) -> pd.DataFrame:
    """`groups` with the token table's figures added where the samples table had none."""
    if tokens.empty:
        return groups
    out = groups.merge(tokens, on="group", how="left", suffixes=("", "_tokens"))
    for key in tokens.columns.drop("group"):
        if f"{key}_tokens" in out:  # the samples column existed but was empty: fill from tokens
            out[key] = out[key].fillna(out.pop(f"{key}_tokens"))
    return out


def available(groups: pd.DataFrame, sort: str) -> bool:
    """Whether `groups` (figures_sql's rows) can be ordered by `sort`: some group has its figure."""
    return sort == GROUP or (sort in groups and bool(groups[sort].notna().any()))


def ordered(groups: pd.DataFrame, sort: str) -> pd.DataFrame:
    """`groups` in the order `sort` gives: the largest share first (no_signal: the zero-spread groups
    first, then by spread); groups without the figure last; ties by group index.

    >>> g = pd.DataFrame({"group": [0, 1, 2], "kl": [0.1, None, 0.3], "signal": [True, False, True],
    ...                   "no_signal": [0.5, 0.0, 0.2]})
    >>> ordered(g, "kl")["group"].tolist(), ordered(g, "no_signal")["group"].tolist()
    ([2, 0, 1], [1, 2, 0])
    """
    if not available(groups, sort) or sort == GROUP:
        return groups.sort_values("group").reset_index(drop=True)
    if ORDERS[sort].lowest_first:
        keys, ascending = ["signal", sort, "group"], [True, True, True]
    else:
        keys, ascending = [sort, "group"], [False, True]
    return groups.sort_values(keys, ascending=ascending, na_position="last", kind="stable").reset_index(drop=True)
