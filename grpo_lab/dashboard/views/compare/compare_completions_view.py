"""Compare's completions view: one prompt, matched across runs by what it asks (rundir.chat.prompt_key,
so a native run and a TRL or verl import line up), each run's G completions at the same or nearest
step side by side with reward and A_i; above it, the prompts the runs did most differently on."""

from __future__ import annotations

import functools
import pandas as pd
import streamlit as st

from grpo_lab.dashboard import markup, ui
from grpo_lab.dashboard.i18n import t
from grpo_lab.dashboard.reading import data, prompt_queries
from grpo_lab.dashboard.views import long_text, prompt_history_view
from grpo_lab.dashboard.views.groups import groups_view
from grpo_lab.rundir.prompt_history import nearest
from grpo_lab.rundir.reader import RunInfo

PROMPT_KEY = "cmpc_prompt"


def ranked(long: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """Prompts drawn by two runs or more, the most differently done first. `long` has one row per
    (run, key) with pass_rate and mean_reward over that run's draws of the prompt; the result has
    key, runs (how many drew it), pass_spread and reward_spread (largest minus smallest across the
    runs), and each run's pass rate in a column named by the run.

    >>> long = pd.DataFrame({"run": ["a", "b", "a", "b", "a"], "key": ["1+1", "1+1", "2+2", "2+2", "3+3"],
    ...                      "pass_rate": [1.0, 0.25, 0.5, 0.5, 0.0], "mean_reward": [1.0, 0.25, 0.4, 0.6, 0.0]})
    >>> ranked(long, ["a", "b"])[["key", "runs", "pass_spread", "reward_spread", "a", "b"]].values.tolist()
    [['1+1', 2, 0.75, 0.75, 1.0, 0.25], ['2+2', 2, 0.0, 0.2, 0.5, 0.5]]
    """
    if long.empty:
        return pd.DataFrame(columns=["key", "runs", "pass_spread", "reward_spread", *names])
    rate = long.pivot_table(index="key", columns="run", values="pass_rate", aggfunc="first")
    reward = long.pivot_table(index="key", columns="run", values="mean_reward", aggfunc="first")
    out = pd.DataFrame({"runs": rate.notna().sum(axis=1), "pass_spread": rate.max(axis=1) - rate.min(axis=1),
                        "reward_spread": (reward.max(axis=1) - reward.min(axis=1)).round(12)})
    out = out.join(rate.reindex(columns=names)).reset_index()
    out = out[out["runs"] >= 2].sort_values(["pass_spread", "reward_spread", "key"], ascending=[False, False, True])
    return out.reset_index(drop=True)


def _per_run(runs: list[RunInfo], pass_at: float) -> tuple[pd.DataFrame, list[str]]:
    """(run, key, prompt_id, draws, pass_rate, mean_reward) for every prompt of every run."""
    frames, problems = [], []
    for r in runs:
        out, found = prompt_queries.outcomes(r.name, pass_at)
        problems += [f"{r.name}: {p}" for p in found]
        if out.empty:
            continue
        keys, found = prompt_queries.prompt_keys(r.name)
        problems += [f"{r.name}: {p}" for p in found]
        out = out.assign(run=r.name, prompt_id=out["prompt_id"].astype(str))
        out = out.assign(key=out["prompt_id"].map(keys).fillna(out["prompt_id"]))
        # two ids asking the same question in one run: the one drawn most speaks for it
        frames.append(out.sort_values("draws", ascending=False).drop_duplicates("key"))
    long = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return long, problems


def _pick_from_table(table_key: str, keys: list[str]) -> None:
    rows = st.session_state[table_key].selection.rows
    if rows:
        st.session_state[PROMPT_KEY] = keys[rows[0]]


def render(runs: list[RunInfo]) -> None:
    st.subheader(t("compare_completions.heading"))
    names = [r.name for r in runs]
    pass_at = prompt_history_view.pass_threshold("cmpc_pass_at")
    long, problems = _per_run(runs, pass_at)
    ui.warn(problems)
    table = ranked(long, names)
    if table.empty:
        st.caption(t("compare.no_common"))
        return
    keys = table["key"].tolist()
    st.caption(t("compare_completions.ranked_help", n=len(table)))
    shown = table.assign(key=table["key"].map(lambda k: markup.cut_plain(k, 80)))
    st.dataframe(shown, hide_index=True, key="cmpc_ranked", on_select=functools.partial(_pick_from_table, "cmpc_ranked", keys),
                 selection_mode="single-row", height=min(38 + 35 * len(shown), 280),
                 column_config=ui.column_config(shown.columns, formats={
                     c: "%.2f" for c in ("pass_spread", "reward_spread", *names)},
                     labels={"key": t("groups.prompt"), "runs": t("compare_completions.col.runs"),
                             "pass_spread": t("compare_completions.col.pass_spread"),
                             "reward_spread": t("compare_completions.col.reward_spread")}))
    if st.session_state.get(PROMPT_KEY) not in keys:
        st.session_state[PROMPT_KEY] = keys[0]  # the prompt the runs did most differently on
    c1, c2 = st.columns([3, 1])
    key = c1.selectbox(t("groups.prompt"), keys, key=PROMPT_KEY, format_func=lambda k: markup.cut_plain(k, 80))
    step = c2.number_input(t("compare_completions.at_step"), min_value=1, value=None, step=1, key="cmpc_step")
    # what the prompt asks, whole (the picker cuts it): the question every column below answers
    st.html(f'<div class="grpo-prompt">{markup.cut_text(key, markers=False, limit=groups_view.PROMPT_CHARS)}</div>')
    ids = {row.run: row.prompt_id for row in long[long["key"] == key].itertuples()}
    found = {}
    for info in runs:
        if ids.get(info.name) is not None:
            found[info.name], problems = prompt_queries.draws(info.name, ids[info.name], pass_at)
            ui.warn(problems)
    target = step if step is not None else common_step(found)
    draws = {name: nearest(frame, target) for name, frame in found.items() if target is not None}
    shown = {name: int(d["step"]) for name, d in draws.items() if d is not None}
    if len(set(shown.values())) > 1:  # one run never drew it at that step: say so, not only in the box's label
        st.info(t("compare_completions.steps_differ", step=target,
                  steps=", ".join(f"{markup.md(n)} {s}" for n, s in shown.items())))
    cols = st.columns(len(runs))
    for col, info in zip(cols, runs):
        with col:
            show_run(info, ids.get(info.name), draws.get(info.name))


def common_step(found: dict[str, pd.DataFrame]) -> int | None:
    """The step to show every run at when none is asked: the latest step all of them had reached when they
    drew the prompt (the smallest of their latest draws), so the runs are compared at one point of training.

    >>> common_step({"a": pd.DataFrame({"step": [3, 40]}), "b": pd.DataFrame({"step": [14]})})
    14
    """
    latest = [int(f["step"].max()) for f in found.values() if not f.empty]
    return min(latest) if latest else None


def show_run(info: RunInfo, prompt_id: str | None, draw: pd.Series | None) -> None:
    """One run's draw of the prompt (its draw nearest the step shown), as Groups shows a group."""
    name = info.name
    if prompt_id is None or draw is None:
        st.caption(t("compare_completions.not_drawn", name=markup.md(name)))
        return
    rows, problems = prompt_queries.completions(name, prompt_id, int(draw["step"]), int(draw["group"]))
    ui.warn(problems)
    st.markdown(t("compare_completions.run_line", name=markup.md(name), step=int(draw["step"]),
                  mean=f"{draw['mean_reward']:.3f}", std=f"{draw['std']:.3f}", rate=f"{draw['pass_rate']:.0%}",
                  mode=markup.code(data.settings(info).std_mode)))
    st.html(markup.responses_table(rows, groups_view.reward_columns(rows), compact=True, markers=False))
    drawn = f"{name}-step{int(draw['step'])}-group{int(draw['group'])}"
    long_text.offer(long_text.group_texts(rows, drawn), key=f"cmpc_long_{drawn}")  # texts drawn cut, whole on request
    prompt_history_view.link(name, prompt_id)
