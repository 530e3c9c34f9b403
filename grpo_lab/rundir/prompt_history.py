"""A prompt followed through a run: every draw (a group of that prompt at a step) and, per prompt,
whether the run learned it, forgot it, never solved it or always did. DuckDB over tables/samples.

A completion *passes* when its reward is at least the pass threshold `pass_at` (the Compare page's
"steps to threshold" default, 0.5, unless the reader picks another); an unscored completion (reward
null or NaN) does not pass. A draw's pass rate is the share of its G completions that pass; with 0/1
rewards and any threshold in (0, 1] it is the share rewarded 1.

Per prompt, *early* is the mean pass rate over the first half of its draws (by step) and *late* over
the last half (an odd middle draw is in neither), so a prompt drawn twice compares its two draws:

- never solved: no completion passed in any draw;
- always solved: every completion passed in every draw (with 0/1 rewards these groups had no signal);
- learned: late > early;  forgotten: late < early;  steady: late = early;  once: a single draw.

No Streamlit here: the dashboard caches on top (dashboard/reading/prompt_queries.py); the bench and
scripts call these directly. Never raises on a damaged run: problems come back as lines.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from grpo_lab.rundir import query as rq

DEFAULT_PASS_AT = 0.5  # variants_view's "steps to threshold" starts there too
KINDS = ("learned", "forgotten", "never", "always", "steady", "once")

# A NaN reward is an unscored completion, like null: DuckDB orders NaN above every number (NaN >= 0.5
# is true there), so it becomes null before anything compares or averages it.
_SCORED = "SELECT *, nullif(reward, 'nan'::DOUBLE) AS r FROM {src}"
_PASSED = "coalesce(r >= $pass_at, false)::DOUBLE"

DRAWS_SQL = f"""
SELECT step, "group", count(*) AS size,
       avg(r) AS mean_reward, stddev_pop(r) AS std, avg({_PASSED}) AS pass_rate,
       min(advantage) AS a_min, max(advantage) AS a_max,
       string_agg(coalesce(format('{{:.3g}}', r), '∅'), ' ' ORDER BY sample_idx) AS rewards,
       string_agg(format('{{:.3g}}', advantage), ' ' ORDER BY sample_idx) AS advantages
FROM ({_SCORED}) WHERE prompt_id = $prompt_id
GROUP BY step, "group" ORDER BY step, "group"
"""

OUTCOMES_SQL = f"""
WITH d AS (  -- a group has one prompt (its key is (step, group)): integer keys group faster than text
    SELECT any_value(prompt_id) AS prompt_id, step, "group", avg(r) AS mean_reward, avg({_PASSED}) AS pass_rate,
           max(abs(advantage)) AS a_abs
    FROM ({_SCORED}) GROUP BY step, "group"),
n AS (
    SELECT *, row_number() OVER (PARTITION BY prompt_id ORDER BY step, "group") AS k,
           count(*) OVER (PARTITION BY prompt_id) AS n FROM d)
SELECT prompt_id, count(*) AS draws, min(step) AS first_step, max(step) AS last_step,
       avg(mean_reward) AS mean_reward, avg(pass_rate) AS pass_rate,
       avg(pass_rate) FILTER (WHERE k <= n // 2) AS early,
       avg(pass_rate) FILTER (WHERE k > n - n // 2) AS late,
       min(pass_rate) AS min_pass, max(pass_rate) AS max_pass,
       avg((a_abs = 0)::DOUBLE) AS no_signal
FROM n GROUP BY prompt_id ORDER BY prompt_id
"""


def draws(run_dir: str | Path, prompt_id: str, pass_at: float = DEFAULT_PASS_AT) -> tuple[pd.DataFrame, list[str]]:
    """Every draw of `prompt_id`, by step: step, group, size (G), mean_reward, std (population, as
    std_mode group divides by), pass_rate, a_min, a_max, and the G rewards and advantages in
    sample_idx order, each as one short text ("1 0 0.5 ∅": 3 significant digits, ∅ unscored; written
    by DuckDB, as formatting them in Python took longer than the query on a prompt drawn 2,900 times)."""
    return rq.query(run_dir, "samples", DRAWS_SQL, {"prompt_id": str(prompt_id), "pass_at": float(pass_at)})


def completions(run_dir: str | Path, prompt_id: str, step: int, group: int) -> tuple[pd.DataFrame, list[str]]:
    """One draw's completions (every samples column), by sample_idx."""
    return rq.query(run_dir, "samples", "SELECT * EXCLUDE (filename, file_row_number) FROM {src} "
                    'WHERE step = $step AND "group" = $group AND prompt_id = $prompt_id ORDER BY sample_idx',
                    {"step": int(step), "group": int(group), "prompt_id": str(prompt_id)})


def outcomes(run_dir: str | Path, pass_at: float = DEFAULT_PASS_AT) -> tuple[pd.DataFrame, list[str]]:
    """One row per prompt: draws, first_step, last_step, mean_reward and pass_rate over its draws,
    early, late, change (late - early), min_pass, max_pass, no_signal (share of draws with every
    A = 0) and kind (see the module docstring)."""
    df, problems = rq.query(run_dir, "samples", OUTCOMES_SQL, {"pass_at": float(pass_at)})
    return classify(df), problems


def classify(df: pd.DataFrame) -> pd.DataFrame:
    """`outcomes`' rows with change and kind added, from draws, early, late, min_pass and max_pass.

    >>> rows = pd.DataFrame({"draws": [3, 2, 2, 4, 1, 2], "early": [0.0, 1.0, 0.0, 1.0, None, 0.5],
    ...                      "late": [0.5, 0.25, 0.0, 1.0, None, 0.5], "min_pass": [0.0, 0.25, 0.0, 1.0, 0.5, 0.5],
    ...                      "max_pass": [0.5, 1.0, 0.0, 1.0, 0.5, 0.5]})
    >>> classify(rows)["kind"].tolist()
    ['learned', 'forgotten', 'never', 'always', 'once', 'steady']
    """
    if df.empty:
        return df.assign(change=pd.Series(dtype=float), kind=pd.Series(dtype=str))
    change = df["late"] - df["early"]
    kind = pd.Series("steady", index=df.index)
    kind[change > 0] = "learned"
    kind[change < 0] = "forgotten"
    kind[df["draws"] < 2] = "once"
    kind[df["max_pass"] == 0] = "never"
    kind[df["min_pass"] == 1] = "always"
    return df.assign(change=change, kind=kind)


def nearest(found: pd.DataFrame, step: int) -> pd.Series | None:
    """The draw of `found` (draws' rows) at `step`, else the nearest one (the earlier on a tie).

    >>> int(nearest(pd.DataFrame({"step": [2, 6, 9], "group": [0, 1, 0]}), 4)["step"])
    2
    """
    if found.empty:
        return None
    distance = (found["step"] - int(step)).abs()
    return found.loc[distance.sort_values(kind="stable").index[0]]
