"""Under Compare's "cannot be compared yet": add seeds to the configurations that ran with one, asked
once, confirmed, then queued through the launch queue (grpo_lab/launching/more_seeds.py) and said."""

from __future__ import annotations

import streamlit as st

from grpo_lab.dashboard import markup
from grpo_lab.dashboard.i18n import t
from grpo_lab.dashboard.reading import data
from grpo_lab.launching import form_checks, more_seeds

SEEDS = 2  # each configuration then has 3: the variants verdict needs 2
KEY = "cmp_more_seeds"  # session state: the variants asked for (awaiting confirmation), and the outcome


def _ask(variants: list[list[str]]) -> None:
    st.session_state[KEY] = {"asked": variants}


def _queue(variants: list[list[str]]) -> None:
    try:
        added = more_seeds.add(data.runs_dir(), variants, SEEDS)
    except form_checks.LaunchError as exc:
        st.session_state[KEY] = {"for": variants, "error": str(exc)}
        return
    st.session_state[KEY] = {"for": variants, "done": [(r.name, r.seed, r.of, queued) for r, queued in added]}


def _cancel() -> None:
    st.session_state.pop(KEY, None)


def offer(variants: list[list[str]]) -> None:
    """The button for `variants` (each a list of run names, its first's options taken), its
    confirmation, or what it queued."""
    state = st.session_state.get(KEY) or {}
    if state.get("for", state.get("asked")) != variants:  # another choice of runs: offered afresh
        state = {}
    if "done" in state:
        lines = [t("compare.more_seeds_run", name=markup.md(name), seed=seed, of=markup.md(of),
                   state=t("compare.more_seeds_queued") if queued else t("compare.more_seeds_started"))
                 for name, seed, of, queued in state["done"]]
        st.success(t("compare.more_seeds_done", n=len(lines)) + "\n\n" + "\n".join(f"- {line}" for line in lines))
        return
    if "error" in state:
        st.error(t("compare.more_seeds_refused", error=markup.md(state["error"])))
    if state.get("asked") == variants:
        try:
            planned = more_seeds.plan(data.runs_dir(), variants, SEEDS)
        except form_checks.LaunchError as exc:
            st.error(t("compare.more_seeds_refused", error=markup.md(str(exc))))
            return
        st.info(t("compare.more_seeds_confirm", n=len(planned),
                  runs=", ".join(f"{markup.md(r.name)} (seed {r.seed})" for r in planned)))
        yes, no, _ = st.columns([1, 1, 3])
        yes.button(t("compare.more_seeds_yes", n=len(planned)), key=f"{KEY}_yes", type="primary", on_click=_queue,
                   args=(variants,), width="stretch")
        no.button(t("compare.more_seeds_cancel"), key=f"{KEY}_no", on_click=_cancel, width="stretch")
        return
    st.button(t("compare.more_seeds", n=SEEDS), key=KEY + "_ask", on_click=_ask, args=(variants,),
              help=t("compare.more_seeds_help"))
