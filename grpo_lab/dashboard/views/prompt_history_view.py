"""The prompt-history page's body: one prompt followed through a run (every draw, its G rewards,
pass rate and completions with their advantages), and the run's prompts sorted into learned,
forgotten, never solved and always solved (rundir.prompt_history defines each)."""

from __future__ import annotations

import functools

import pandas as pd
import streamlit as st

from grpo_lab.dashboard import markup, pages, ui
from grpo_lab.dashboard.i18n import t
from grpo_lab.dashboard.reading import prompt_queries, queries
from grpo_lab.dashboard.views import charts, long_text
from grpo_lab.dashboard.views.groups import groups_view
from grpo_lab.rundir.prompt_history import DEFAULT_PASS_AT
from grpo_lab.rundir.reader import RunInfo

PROMPT_KEY = "ph_prompt"
SEARCH_KEY = "ph_search"
VIEW_KEY = "ph_view"
TABLES = ("learned", "forgotten", "never", "always")  # the kinds given a table, in this order
ORDERS = {"learned": ("change", False), "forgotten": ("change", True), "never": ("draws", False),
          "always": ("draws", False)}  # the first rows: the largest gain, the largest loss, the most drawn


def link(run: str, prompt_id) -> None:
    """One click from a group (Groups, Compare) to this prompt's history in `run`."""
    st.page_link(pages.path("prompt_history"), label=t("prompt_history.open"), icon=pages.icon("prompt_history"),
                 query_params={"run": run, "prompt": str(prompt_id)})


def pass_threshold(key: str) -> float:
    """The pass threshold input, with the definition of a pass under it (said on every page that counts passes)."""
    pass_at = st.number_input(t("prompt_history.pass_at"), value=DEFAULT_PASS_AT, step=0.05, format="%.2f",
                              key=key, help=t("prompt_history.pass_at_help"))
    st.caption(t("prompt_history.pass_definition", pass_at=f"{pass_at:g}"))
    return float(pass_at)


def pick_prompt(run: str) -> str | None:
    """The prompt to follow: ?prompt= (a link wins over what was picked before), else a pick among
    the prompts whose id or question contains the search text."""
    texts, problems = prompt_queries.prompt_keys(run)
    ui.warn(problems)
    if not texts:
        st.info(t("groups.no_samples"))
        return None
    wanted = st.query_params.get("prompt")
    if wanted in texts and st.session_state.get(PROMPT_KEY) != wanted:  # a pick below rewrites the address
        st.session_state[PROMPT_KEY] = wanted
        st.session_state[SEARCH_KEY] = ""
    c1, c2 = st.columns([1, 2])
    text = c1.text_input(t("prompt_history.search"), key=SEARCH_KEY, placeholder=t("prompt_history.search_placeholder"))
    needle = text.strip().lower()
    ids = [i for i, q in texts.items() if needle in i.lower() or needle in q.lower()]
    if not ids:
        c2.caption(t("prompt_history.no_prompt_matches"))
        return None
    if st.session_state.get(PROMPT_KEY) not in ids:
        st.session_state[PROMPT_KEY] = ids[0]
    shown = {i: f"{i} · {markup.cut_plain(q, 80)}" if q != i else i for i, q in texts.items()}
    picked = c2.selectbox(t("prompt_history.prompt", n=len(ids)), ids, key=PROMPT_KEY, format_func=shown.get)
    if st.query_params.get("prompt") != picked:
        st.query_params["prompt"] = picked  # the address names the prompt: reload and share keep it
    return picked


def show_history(info: RunInfo, prompt_id: str, pass_at: float) -> None:
    run = info.name
    found, problems = prompt_queries.draws(run, prompt_id, pass_at)
    ui.warn(problems)
    if found.empty:
        st.info(t("prompt_history.never_drawn", prompt=markup.code(prompt_id)))
        return
    st.subheader(t("prompt_history.heading", prompt=markup.code(prompt_id)))
    completions = int(found["size"].sum())
    passed = float((found["pass_rate"] * found["size"]).sum() / completions)
    c = st.columns(5)
    c[0].metric(t("prompt_history.draws"), len(found))
    c[1].metric(t("prompt_history.completions"), completions)
    c[2].metric(t("prompt_history.mean_reward"), f"{found['mean_reward'].mean():.3f}")
    c[3].metric(t("prompt_history.pass_rate"), f"{passed:.0%}")
    c[4].metric(t("prompt_history.first_last"), f"{found['pass_rate'].iloc[0]:.0%} → {found['pass_rate'].iloc[-1]:.0%}")
    st.vega_lite_chart(spec=charts.prompt_history(found[["step", "mean_reward", "std", "a_min", "a_max"]]),
                       key="ph_chart")
    # newest first; a click on a row opens that draw's completions (the newest until one is clicked)
    table = found.iloc[::-1].reset_index(drop=True)
    columns = ["step", "group", "rewards", "mean_reward", "std", "pass_rate", "advantages"]
    st.caption(t("prompt_history.draws_caption"))
    # a table per prompt: a row picked in one prompt's draws means nothing in another's
    state = st.dataframe(table[columns], hide_index=True, key=f"ph_draws_{prompt_id}", on_select="rerun",
                         selection_mode="single-row", height=min(38 + 35 * len(table), 320),
                         column_config=ui.column_config(columns, formats={"mean_reward": "%.3f", "std": "%.3f",
                                                                          "pass_rate": "percent"},
                                                        labels={"rewards": t("prompt_history.rewards"),
                                                                "advantages": t("prompt_history.advantages"),
                                                                "pass_rate": t("prompt_history.pass_rate")}))
    rows = [r for r in (state.selection.rows if state is not None else []) if r < len(table)]
    show_draw(info, prompt_id, table.iloc[rows[0] if rows else 0])


def show_draw(info: RunInfo, prompt_id: str, draw: pd.Series) -> None:
    """One draw's G completions, each with its reward and the advantage the step gave it."""
    step, group = int(draw["step"]), int(draw["group"])
    rows, problems = prompt_queries.completions(info.name, prompt_id, step, group)
    ui.warn(problems)
    if rows.empty:
        return
    st.markdown(t("prompt_history.draw_line", step=step, group=group, mean=f"{draw['mean_reward']:.3f}",
                  std=f"{draw['std']:.3f}", rate=f"{draw['pass_rate']:.0%}"))
    groups_view.show_prompt(str(rows["prompt"].iloc[0]), markers=False)
    st.html(markup.responses_table(rows, groups_view.reward_columns(rows), markers=False))
    long_text.offer(long_text.group_texts(rows, f"{info.name}-step{step}-group{group}"),
                    key=f"ph_long_{info.name}_{step}_{group}")


def _pick_from_table(table_key: str, ids: list[str]) -> None:
    """A row clicked in an outcomes table opens that prompt's history (a callback: it runs before
    the prompt picker is drawn, the one time its value may be set)."""
    rows = st.session_state[table_key].selection.rows
    if rows:
        st.session_state[PROMPT_KEY] = ids[rows[0]]
        st.session_state[SEARCH_KEY] = ""
        st.session_state[VIEW_KEY] = "prompt"
        st.query_params["prompt"] = ids[rows[0]]


def show_outcomes(run: str, pass_at: float) -> None:
    st.subheader(t("prompt_history.outcomes"))
    st.caption(t("prompt_history.outcomes_help"))
    df, problems = prompt_queries.outcomes(run, pass_at)
    ui.warn(problems)
    if df.empty:
        return
    counts = df["kind"].value_counts()
    st.caption(t("prompt_history.counts", n=len(df), steady=int(counts.get("steady", 0)), once=int(counts.get("once", 0))))
    texts, problems = prompt_queries.prompt_keys(run)
    ui.warn(problems)
    names = {k: t(f"prompt_history.kind.{k}") for k in TABLES}
    tabs = st.tabs([f"{names[k]} ({int(counts.get(k, 0))})" for k in TABLES])
    columns = ["prompt_id", "prompt", "draws", "early", "late", "change", "pass_rate", "mean_reward", "no_signal",
               "first_step", "last_step"]
    for kind, tab in zip(TABLES, tabs):
        with tab:
            by, ascending = ORDERS[kind]
            part = df[df["kind"] == kind].sort_values([by, "prompt_id"], ascending=[ascending, True])
            if part.empty:
                st.caption(t("prompt_history.none_of_kind"))
                continue
            part = part.assign(prompt=part["prompt_id"].map(lambda i: markup.cut_plain(texts.get(str(i), ""), 80)))
            key = f"ph_table_{kind}"
            st.dataframe(part[columns], hide_index=True, key=key, selection_mode="single-row",
                         on_select=functools.partial(_pick_from_table, key, part["prompt_id"].astype(str).tolist()),
                         column_config=ui.column_config(columns, formats={
                             "mean_reward": "%.2f",  # pass rates and their change (points) as percentages, as the metrics
                             **dict.fromkeys(("early", "late", "change", "pass_rate", "no_signal"), "percent")},
                             labels={c: t(f"prompt_history.col.{c}") for c in (
                                 "prompt", "draws", "early", "late", "change", "pass_rate", "no_signal",
                                 "first_step", "last_step")}))


def render(info: RunInfo) -> None:
    # two views, one drawn at a time: the run's prompts scan every sample row, one prompt's history
    # reads only its own draws (a link from a group opens in <= 1 s on a million rows)
    views = {"prompt": t("prompt_history.view.prompt"), "outcomes": t("prompt_history.view.outcomes")}
    view = st.segmented_control(t("prompt_history.view"), list(views), format_func=views.get, default="prompt",
                                key=VIEW_KEY, required=True) or "prompt"
    pass_at = pass_threshold("ph_pass_at")
    if view == "outcomes":
        show_outcomes(info.name, pass_at)
        return
    prompt_id = pick_prompt(info.name)
    if prompt_id is not None:
        show_history(info, prompt_id, pass_at)
