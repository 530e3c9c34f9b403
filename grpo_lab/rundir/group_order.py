"""Which groups of a step made a curve move: the orderings Groups offers, and which curve opens which.

A point on a Live curve (a step) opens Groups at that step with its groups ordered by their share of
that curve's metric. ORDERINGS is the one declaration: a record per ordering with the registered scalar
names (rundir/metrics.py) whose curves open it, the format its figure is said in, its direction, and the
SQL of its figure over the samples table, of its additive share, and over the tokens table; everything
else here (ORDERS, SORTS, figures_sql, token_figures_sql) is derived from it. Its texts are in the
dashboard's locale files under its key: groups_order.<key> (the picker), .short.<key>, .explain.<key>.
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
class Sql:
    """An SQL expression over a group's rows, and the table columns it needs."""

    needs: frozenset[str]
    expr: str


def _sql(expr: str, *needs: str) -> Sql:
    return Sql(frozenset(needs), expr)


def _weighted(value: str) -> tuple[Sql, ...]:
    """The token-weighted group mean of a per-sample mean (`length` tokens each), else the plain mean."""
    return (_sql(f"sum({value} * length) / nullif(sum(CASE WHEN {value} IS NOT NULL THEN length END), 0)",
                 value, "length"),
            _sql(f"avg({value})", value))


@dataclass(frozen=True)
class Order:
    """One ordering of a step's groups. Its texts: groups_order.<key>, .short.<key>, .explain.<key> (locales)."""

    key: str  # the address's `sort=`, and the figure's column in figures_sql
    metrics: tuple[str, ...]  # registered scalar names whose curves open this ordering
    fmt: str  # a group's figure as the picker says it (a format spec)
    # the group's figure over its samples rows: the first of these the run's columns allow (none: not available,
    # unless `tokens` gives it); `suspects` builds its own from the columns (suspects_sql)
    figure: tuple[Sql, ...] = ()
    # the group's additive part of its step's scalar: this per-sample SQL summed (key_mass, below); None for a
    # maximum (ratio_max) or rewards of either sign (reward)
    mass: Sql | None = None
    tokens: Sql | None = None  # the figure over a group's rows of the tokens table, where the samples lack it
    lowest_first: bool = False  # False: the largest share first


ORDERINGS: tuple[Order, ...] = (
    Order("kl", ("kl/mean", "kl/approx", "kl/folded", "kl/penalty"), ".3g",
          figure=_weighted("kl_mean"),  # null when the run has no reference (beta 0)
          mass=_sql("kl_mean * length", "kl_mean", "length"), tokens=_sql("avg(kl)", "kl")),
    Order("clip", ("clip/low", "clip/high", "clip/total"), ".0f",
          figure=(_sql("sum(clipped_tokens)", "clipped_tokens"),
                  # before per-sample counts: the fraction times the length
                  _sql("sum(round(clip_frac * length))", "clip_frac", "length")),
          mass=_sql("clipped_tokens", "clipped_tokens"), tokens=_sql("sum(clipped::INT)", "clipped")),
    # zero-spread groups first: they are what a no-signal step, a flat advantage or a ~0 loss is made of;
    # its share is of the step's groups without signal (figures_sql's no_signal_mass)
    Order("no_signal", ("groups/frac_zero_std", "advantage/mean", "advantage/std", "advantage/min", "advantage/max",
                        "reward/std", "loss/policy", "loss/total"), ".2f",
          figure=(_sql("stddev_pop(reward)"),), lowest_first=True),
    Order("entropy", ("entropy/mean", "loss/entropy_bonus"), ".3g",
          figure=_weighted("entropy_mean"), mass=_sql("entropy_mean * length", "entropy_mean", "length")),
    Order("ratio_max", ("ratio/min", "ratio/mean", "ratio/max"), ".3g",
          figure=(_sql("max(ratio_max)", "ratio_max"),), tokens=_sql("max(ratio)", "ratio")),
    Order("length", ("completion/length_mean", "completion/length_max", "completion/repetitive_frac"), ".1f",
          figure=(_sql("avg(length)", "length"),), mass=_sql("length", "length")),
    Order("truncated", ("completion/truncated_frac",), ".0f",
          figure=(_sql("sum(truncated::INT)", "truncated"),), mass=_sql("truncated::INT", "truncated")),
    Order("reward", ("reward/mean", "reward/min", "reward/max", "rewards/<fn>/mean", "rewards/<fn>/std",
                     "rewards/<fn>/min", "rewards/<fn>/max", "rewards/<fn>/none_frac", "rewards/<fn>/errors"), ".2f",
          figure=(_sql("avg(reward)"),)),
    Order("tool_errors", ("tools/error_frac", "tools/calls_per_rollout", "tools/turns_per_rollout"), ".0f",
          figure=(_sql("sum(tool_errors)", "tool_errors"),), mass=_sql("tool_errors", "tool_errors")),
    Order("mismatch", ("mismatch/logp_diff_mean", "mismatch/logp_diff_max", "mismatch/kl", "mismatch/ratio_mean",
                       "mismatch/ratio_min", "mismatch/ratio_max", "mismatch/out_frac", "mismatch/weight_mean",
                       "mismatch/weight_min", "mismatch/weight_max", "mismatch/masked_frac"), ".3g",
          figure=_weighted("mismatch_mean"), mass=_sql("mismatch_mean * length", "mismatch_mean", "length")),
    # The reward-hacking lens (rundir/honesty.py): groups whose high rewards the answer may not earn
    Order("suspects", ("honesty/<fn>/sign_share", "honesty/<fn>/reward_share", "honesty/length_corr",
                       "honesty/length_corr_trend", "honesty/strict_fail_frac", "honesty/strict_checked",
                       "honesty/groups_all_solved", "honesty/groups_none_solved",
                       "honesty/group_spread", "honesty/group_spread_ratio", "honesty/reward_gain",
                       "honesty/eval_accuracy_gain"), ".1f"),
)
ORDERS: dict[str, Order] = {o.key: o for o in ORDERINGS}
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


def formatted_figure(sort: str, value: float) -> str:
    """A group's figure under ordering `sort` as the picker says it (its Order's format).

    >>> formatted_figure("kl", 0.012345), formatted_figure("clip", 3.0), formatted_figure("length", 41.26)
    ('0.0123', '3', '41.3')
    """
    return format(float(value), ORDERS[sort].fmt)


def _first_allowed(alternatives: tuple[Sql, ...], columns: set[str]) -> str | None:
    return next((sql.expr for sql in alternatives if sql.needs <= columns), None)


def figure_exprs(columns: set[str]) -> dict[str, str]:
    """SQL for each ordering's figure that the samples columns `columns` allow (key -> expression).

    >>> figure_exprs({"reward", "kl_mean"})
    {'kl': 'avg(kl_mean)', 'no_signal': 'stddev_pop(reward)', 'reward': 'avg(reward)'}
    """
    out = {o.key: _first_allowed(o.figure, columns) for o in ORDERINGS}
    out["suspects"] = suspects_sql(columns)
    return {key: sql for key, sql in out.items() if sql is not None}


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


def figures_sql(columns: set[str]) -> str:
    """One row per group of step `$step`: its prompt, size, whether it has signal (any A != 0), whether
    dynamic sampling dropped it, a column per ordering `figure_exprs` allows, and each ordering's `mass`
    (<key>_mass, the samples' figures add back to the step's scalars (docs/run-directory.md), so a group's
    mass over the step's is its share of the point clicked) where the columns allow it."""
    dropped = "bool_or(coalesce(dropped, false))" if "dropped" in columns else "false"
    signal = "coalesce(max(abs(advantage)), 0) > 0"
    figures = "".join(f", {sql} AS {key}" for key, sql in figure_exprs(columns).items())
    masses = "".join(f", sum({o.mass.expr}) AS {o.key}_mass" for o in ORDERINGS
                     if o.mass is not None and o.mass.needs <= columns)
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


# The figures the tokens table also holds (each ordering's `tokens`): key -> the SQL over a group's tokens.
TOKEN_FIGURES: dict[str, Sql] = {o.key: o.tokens for o in ORDERINGS if o.tokens is not None}


def token_figures_sql(columns: set[str], missing: set[str]) -> str | None:
    """The figures in `missing` that the tokens table (columns `columns`) holds, per group of step `$step`;
    the policy's tokens only (a tool's result has no ratio, KL or clip)."""
    keys = [k for k, sql in TOKEN_FIGURES.items() if k in missing and sql.needs <= columns]
    if not keys:
        return None
    model = " AND source IS DISTINCT FROM 'tool'" if "source" in columns else ""
    figures = ", ".join(f"{TOKEN_FIGURES[k].expr} AS {k}" for k in keys)
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
