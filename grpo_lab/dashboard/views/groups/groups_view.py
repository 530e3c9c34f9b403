"""The Groups page's body: find a group, show its responses, its advantage computation, its tokens."""

from __future__ import annotations

import html

import pandas as pd
import streamlit as st

from grpo_lab.dashboard import markup, pages, ui
from grpo_lab.dashboard.reading import data, queries
from grpo_lab.dashboard.views import charts, long_text
from grpo_lab.dashboard.views.groups import group_math, groups_order, rating, rescore_view, step_nav
from grpo_lab.dashboard.views.groups import turns as turns_view
from grpo_lab.dashboard.i18n import t
from grpo_lab.objective.options import STD_MODES
from grpo_lab.rundir import group_order
from grpo_lab.rundir.reader import RunInfo

Target = tuple[int, int]  # (step, group): a group, exactly (docs/run-directory.md)
PROMPT_CHARS = 2000  # a longer prompt is cut on the page; all of it is one click away


def _pick_row(df: pd.DataFrame, key: str, columns: list[str]) -> int | None:
    """A candidate table; returns the selected row (the first one until a row is clicked)."""
    state = st.dataframe(df[columns], hide_index=True, key=key, on_select="rerun", selection_mode="single-row",
                         height=min(38 + 35 * len(df), 280),
                         column_config=ui.column_config(columns, formats={
                             c: "%.3f" for c in ("mean_reward", "std", "a_max", "a_min", "reward", "advantage")}))
    rows = state.selection.rows if state is not None else []
    return rows[0] if rows else (0 if len(df) else None)


def find(run: str, mode: str, current_prompt: str | None) -> Target | None:
    """The finder widgets for `mode`; returns the group to show."""
    if mode == "step":
        steps, problems = queries.sample_steps(run)
        ui.warn(problems)
        if not steps:
            st.info(t("groups.no_samples"))
            return None
        c1, c2 = st.columns([1, 3])
        step = c1.number_input(t("groups.step", first=steps[0], last=steps[-1]), min_value=1, value=None, step=1,
                               key="groups_step", placeholder=t("groups.step_placeholder", last=steps[-1]))
        asked = step  # what the address keeps (None: the latest step, whichever it is then)
        if step is None or step not in set(steps):
            if step is not None:
                c1.caption(t("groups.nearest_step", step=step))
            step = steps[-1] if step is None else min(steps, key=lambda s: abs(s - step))
        step_nav.show(run, steps, int(step))  # one step back or on, or to the doctor's findings
        # the step's groups as the ordering picker reads them (one query): mean reward, its spread, signal, dropped
        groups, problems = queries.group_figures(run, step)
        ui.warn(problems)
        if groups.empty:
            return None
        groups = groups.set_index("group").astype({"reward": float, "no_signal": float})
        sort, figures = groups_order.picker(run, int(step), asked, c2)
        labels = {g: t("groups.option", group=g, prompt=r.prompt_id, mean=f"{r['reward']:.2f}",
                       std=f"{r['no_signal']:.2f}")
                  + ("" if r.signal else t("groups.option_no_signal"))
                  + (t("groups.option_dropped") if r.dropped else "") + figures.get(g, "") for g, r in groups.iterrows()}
        detail = data.settings(data.run(run)).token_detail_groups
        if sort == group_order.GROUP:
            options = list(labels)
            # Start on a group worth looking at: one with a learning signal, token detail if possible.
            with_signal = [g for g in options if groups.loc[g, "signal"] and not groups.loc[g, "dropped"]]
            first = next((g for g in with_signal if g < detail), with_signal[0] if with_signal else options[0])
        else:  # the ordering's first group: the largest share of the metric the user came for
            options = [g for g in figures if g in labels] + [g for g in labels if g not in figures]
            first = options[0]
        key = f"groups_pick_{step}" if sort == group_order.GROUP else f"groups_pick_{step}_{sort}"
        goto = st.session_state.pop(rating.GOTO_KEY, None)  # rating's Enter: the next unrated group
        if goto is not None and goto[0] == int(step) and goto[1] in options:
            st.session_state[key] = goto[1]
        # index only where the state has no pick: both would draw Streamlit's "set via the Session State API" warning
        g = c2.selectbox(t("groups.pick", n=len(groups), step=step), options,
                         index=0 if key in st.session_state else options.index(first),
                         format_func=labels.get, key=key)
        return int(step), int(g)
    if mode == "search":
        text = st.text_input(t("groups.search"), key="groups_search", placeholder=t("groups.search_placeholder"))
        if not text:
            return None
        hits, problems = queries.search_completions(run, text)
        ui.warn(problems)
        if hits.empty:
            st.caption(t("groups.no_hit"))
            return None
        st.caption(t("groups.hits", n=len(hits), first=t("groups.first_200") if len(hits) >= 200 else ""))
        # scores before the text, and the text cut: a click on the row opens the group with all of it
        hits = hits.assign(completion=hits["completion"].map(markup.cut_plain))
        i = _pick_row(hits, "groups_hits", ["step", "group", "prompt_id", "sample_idx", "reward", "advantage",
                                            "completion"])
        return int(hits.iloc[i]["step"]), int(hits.iloc[i]["group"])
    arg = ""
    if mode == "prompt":
        ids, problems = queries.prompt_ids(run)
        ui.warn(problems)
        if not ids:
            return None
        if st.session_state.get("groups_prompt") not in ids:
            st.session_state["groups_prompt"] = current_prompt if current_prompt in ids else ids[0]
        arg = st.selectbox(t("groups.prompt"), ids, key="groups_prompt")
    found, problems = queries.group_summaries(run, mode, arg)
    ui.warn(problems)
    if found.empty:
        st.caption(t("groups.no_match") if mode != "no_signal" else t("groups.all_spread"))
        return None
    if mode == "prompt":
        st.vega_lite_chart(spec=charts.prompt_history(found), key="groups_prompt_chart")
    st.caption(t("groups.found", n=len(found), first=t("groups.first_200") if len(found) >= 200 else ""))
    i = _pick_row(found, f"groups_found_{mode}", ["step", "group", "prompt_id", "mean_reward", "std", "a_max", "a_min"])
    return int(found.iloc[i]["step"]), int(found.iloc[i]["group"])


def reward_columns(rows: pd.DataFrame) -> list[str]:
    return [c for c in rows.columns if c.startswith("rewards/")]


def group_rows(run: str, target: Target) -> tuple[pd.DataFrame, list[str]]:
    step, group = target
    rows, problems = queries.step_samples(run, step)
    if rows.empty:
        return rows, problems
    return rows[rows["group"] == group].sort_values("sample_idx").reset_index(drop=True), problems


def _step_groups(run: str, step: int, number: int) -> list[list[float | None]]:
    """The rewards of the step's other trained groups: std_mode batch divides by their std too."""
    rows, _ = queries.step_samples(run, step)
    if "dropped" in rows:
        rows = rows[~rows["dropped"].fillna(False).astype(bool)]
    return [[None if pd.isna(v) else float(v) for v in g["reward"]] for n, g in rows.groupby("group") if n != number]


def show_group(info: RunInfo, target: Target) -> None:
    run, (step, number) = info.name, target
    group, problems = group_rows(run, target)
    ui.warn(problems)
    if group.empty:
        st.info(t("groups.no_group", group=number, step=step))
        return
    prompt_id = group["prompt_id"].iloc[0]
    st.session_state["groups_current_prompt"] = prompt_id  # "same prompt across steps" starts here
    cfg, settings = info.config or {}, data.settings(info)
    std_mode = settings.std_mode
    if std_mode not in STD_MODES:
        st.warning(t("groups.unknown_std_mode", mode=markup.md(repr(std_mode))))
        std_mode = "group"
    st.subheader(t("groups.heading", step=step, group=number, prompt=markup.code(prompt_id)))  # run text: never markup
    st.page_link(pages.path("prompt_history"), label=t("prompt_history.open"), icon=pages.icon("prompt_history"),
                 query_params={"run": run, "prompt": str(prompt_id)})
    if "dropped" in group and group["dropped"].fillna(False).astype(bool).any():
        st.info(t("groups.dropped"))  # dynamic sampling threw it away: logged, never trained on
    # whitespace markers help with the one-character demo tokenizer and hide real prose: off for real models
    markers = st.toggle(t("groups.markers"), value=settings.model == "tiny",
                        key="groups_markers")
    show_prompt(str(group["prompt"].iloc[0]), markers)
    rewards = [None if pd.isna(v) else float(v) for v in group["reward"]]
    worked = group_math.compute(rewards, group["advantage"].astype(float).tolist(), std_mode,
                                settings.advantage_epsilon, _step_groups(run, step, number) if std_mode == "batch" else None)
    adv = group["advantage"]
    c = st.columns(5)
    c[0].metric("G", len(group))
    c[1].metric(t("groups.mean_reward"), f"{worked.mean:.3f}")
    c[2].metric(t("groups.std"), f"{worked.std:.3f}")
    c[3].metric(t("groups.pushed"), f"{int((adv > 0).sum())} / {int((adv < 0).sum())}")
    c[4].metric(t("groups.signal"), t("groups.no_signal") if worked.zero_std else t("common.yes"),
                help=t("groups.no_signal_help") if worked.zero_std else None)
    st.markdown(t("groups.responses"))
    st.html(markup.responses_table(group, reward_columns(group), markers=markers))
    long_text.offer(long_text.group_texts(group, f"{run}-step{step}-group{number}"),
                    key=f"long_{run}_{step}_{number}")  # texts drawn cut for their length, whole on request
    turns_view.show(group, markers)  # runs with tools: each rollout's tool calls and results, set apart
    rating.show(info, target, group)  # a person's scores for these completions (rundir/labels.py)
    rescore_view.render(info, target, group)  # another reward's scores and advantages beside the run's (grpo_lab/finished_runs/rescore.py)
    if "rewards/correctness" in group and "answer" in group and group["answer"].notna().any():
        show_verdicts(group, (cfg.get("reward_params") or {}).get("correctness") or {})
    show_computation(group, worked, std_mode, ppo=settings.algo == "ppo")
    show_tokens(info, target, group)


def show_verdicts(group: pd.DataFrame, params: dict) -> None:
    """Why the correctness reward scored each response as it did: what it read from the response
    and from the reference, and who decided (rewards.verifier.explain, the reward's own rules)."""
    from grpo_lab.rewards.verifier import explain  # noqa: PLC0415 - sympy and math-verify: only when opened

    mode = params.get("mode", "lenient") if isinstance(params, dict) else "lenient"
    shown_mode = t(f"layout_mode.{mode}") if mode in ("lenient", "strict") else markup.md(mode)  # verifier.MODES
    with st.expander(t("groups.verdicts", mode=shown_mode)):  # config.json's text: never markup
        rows = []
        for _, r in group.sort_values("sample_idx").iterrows():
            size = len(str(r["completion"]))
            why = (explain(str(r["completion"]), r["answer"], mode=mode) if size <= markup.WHOLE_CHARS else
                   {"reason": t("groups.verdict_long", n=f"{size:,}", heading=t("long_text.heading"))})  # 1 MB: 5 s
            rows.append({"i": int(r["sample_idx"]), "answer read": why.get("answer"), "reference read": why.get("gold"),
                         "score": why.get("verdict"), "decided by": why.get("path"), "why": why.get("reason")})
        verdicts = pd.DataFrame(rows)
        st.dataframe(verdicts, hide_index=True, column_config=ui.column_config(verdicts.columns))


def show_prompt(prompt: str, markers: bool) -> None:
    """A chat-formatted prompt as its turns (system, user), the raw text one click away."""
    turns = markup.chat_turns(prompt)
    st.markdown(t("groups.prompt_heading"))
    # st.html, not st.markdown: escaped text is still Markdown (an image, a link) to st.markdown
    if not turns:
        st.html(f'<div class="grpo-prompt">{markup.cut_text(prompt, markers, limit=PROMPT_CHARS)}</div>')
        return
    for role, content in turns:
        st.html(f'<div class="grpo-prompt"><small><b>{html.escape(role)}</b></small><br>'
                f"{markup.cut_text(content, markers, limit=PROMPT_CHARS)}</div>")
    if len(prompt) <= markup.WHOLE_CHARS:  # a longer one is offered whole below the responses (long_text.py)
        with st.expander(t("groups.raw_prompt")):
            st.code(prompt, language=None)


def show_computation(group: pd.DataFrame, worked: group_math.GroupMath, std_mode: str, ppo: bool) -> None:
    """The chapter's table for this group, and the check against the logged advantages."""
    st.markdown(t("groups.computation"))
    st.caption(t("groups.std_mode", mode=std_mode, formula=group_math.std_formula(std_mode)))
    table = worked.table.copy()
    table.insert(0, "i", group["sample_idx"].to_numpy())
    if ppo:
        table = table.rename(columns={"A_i (recomputed)": "A_i (GRPO would use)", "A_i (logged)": "A (PPO, logged)",
                                      "effect": "effect under GRPO"})
    st.dataframe(table, hide_index=True, column_config=ui.column_config(table.columns, formats={
        c: "%.4f" for c in table.columns if c not in ("i", "effect", "effect under GRPO")}))
    if ppo:
        st.info(t("groups.ppo"))
        return
    check = t("groups.check", mode=std_mode, diff=f"{worked.max_diff:.1e}")
    if worked.matches:
        st.success(t("groups.match", check=check))
    else:
        st.error(t("groups.mismatch", check=check))


def show_tokens(info: RunInfo, target: Target, group: pd.DataFrame) -> None:
    tokens, problems = queries.group_tokens(info.name, *target)
    st.markdown(t("groups.tokens"))
    ui.warn(problems)
    settings = data.settings(info)
    if tokens.empty and info.get("source"):  # a TRL or verl run: no per-token figures exist
        st.caption(t("groups.tokens_foreign", source=markup.md(str(info.get("source")).upper())))
        return
    if tokens.empty:
        st.caption(t("groups.no_tokens", n=settings.token_detail_groups))
        return
    ppo = settings.algo == "ppo"
    names = {"ratio": t("groups.mode.ratio"), "clipped": t("groups.mode.clipped"), "kl": t("groups.mode.kl"),
             "advantage": t("groups.mode.advantage")}
    mode = st.segmented_control(t("groups.colour_by"), list(names), default="advantage" if ppo else "ratio",
                                format_func=names.get, key="groups_token_mode", required=True) or "ratio"
    legends = {"ratio": t("groups.legend.ratio"), "clipped": t("groups.legend.clipped"), "kl": t("groups.legend.kl"),
               "advantage": t("groups.legend.advantage")}
    st.caption(t("groups.hover", legend=legends[mode])
               + (t("tool_tokens.legend") if markup.is_tool(tokens).any() else ""))  # a tool's output: context
    bounds = queries.logged_clip_bounds(info.name, target[0], settings.clip_bounds)  # (1 - eps, 1 + eps_high)
    order = group.sort_values(["advantage", "sample_idx"], ascending=[False, True])
    lines = []
    for _, r in order.iterrows():
        toks = tokens[tokens["sample_idx"] == r["sample_idx"]]
        lines.append('<div style="display:flex;gap:8px;align-items:center">'
                     f'{markup.response_chip(r["sample_idx"], r["advantage"], style="min-width:9em;")}'
                     f"{markup.tokens_html(toks, mode, bounds)}</div>")
    st.html("".join(lines))
    with st.expander(t("groups.token_table")):
        pick = st.selectbox(t("groups.response"), order["sample_idx"].tolist(), key="groups_token_resp",
                            format_func=lambda i: f"i={i}")
        cols = [c for c in ("position", "token", "source", "logp_new", "logp_old", "logp_ref", "ratio", "kl", "clipped_low",
                            "clipped_high", "advantage", "value", "return", "token_reward") if c in tokens]
        st.dataframe(markup.policy_tokens(tokens[tokens["sample_idx"] == pick])[cols], hide_index=True,
                     column_config=ui.column_config(cols, labels={"value": t("col.value_estimate")}))


def render(info: RunInfo) -> None:
    finders = {"step": t("groups.find.step"), "no_signal": t("groups.find.no_signal"),
               "positive": t("groups.find.positive"), "negative": t("groups.find.negative"),
               "search": t("groups.find.search"), "prompt": t("groups.find.prompt")}
    groups_order.follow_address()  # a link from Live or a doctor finding: its step and ordering
    st.session_state.setdefault("groups_mode", "step")  # a default beside rating's go_to would draw a warning
    mode = st.segmented_control(t("groups.find"), list(finders), format_func=finders.get,
                                key="groups_mode", required=True) or "step"
    if rating.show_waiting(info) and not queries.sample_steps(info.name)[0]:
        return  # the trainer waits on its first step: that is all there is, no "no samples yet" beside it
    current = st.session_state.get("groups_current_prompt")
    target = find(info.name, mode, current)
    if target is None:
        return
    st.divider()
    show_group(info, target)
