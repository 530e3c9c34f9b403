"""Groups at a step, in an order: the picker, its figures, and the address that carries them.

`/groups?run=R&step=S&sort=kl` opens step S with its groups by their share of KL (rundir/group_order.py
names the orderings and computes the figures). A new address (a click on a Live curve, a doctor
finding's link, a reload, a shared link) sets the widgets once; after that the widgets lead and the
address follows them, so what is on screen can always be shared.
"""

from __future__ import annotations

import math

import streamlit as st

from grpo_lab.dashboard import parse, ui
from grpo_lab.dashboard.i18n import per_language, t
from grpo_lab.dashboard.reading import queries
from grpo_lab.rundir import group_order

SORT_KEY = "groups_sort"
SHARE_FIRST = 3  # the share of the clicked point carried by this many of the first groups is said
ADDRESS_KEY = "groups_address"  # the (step, sort) the address said when last read or written


def sort_names() -> dict[str, str]:
    """Each ordering's name in the current language (a dict: format_func may be called after the run)."""
    return {key: t(f"groups_order.{key}") for key in group_order.SORTS}


def follow_address() -> None:
    """Apply `step` and `sort` from the address to the widgets when the address is new."""
    said = (st.query_params.get("step"), st.query_params.get("sort"))
    if said == st.session_state.get(ADDRESS_KEY):
        return
    st.session_state[ADDRESS_KEY] = said
    step, sort = said
    if step is not None:
        if (number := parse.whole_number(step, low=1)) is not None:
            st.session_state["groups_step"] = number
            st.session_state.pop("groups_mode", None)  # back to its default: browse by step
        else:
            ui.warn([t("groups_order.bad_step", step=parse.shown(step))])
    if sort is not None:
        if sort in group_order.SORTS:
            st.session_state[per_language(SORT_KEY)] = sort
            st.session_state.pop("groups_mode", None)
        else:
            ui.warn([t("groups_order.bad_sort", sort=parse.shown(sort), allowed=", ".join(group_order.SORTS))])


def write_address(step: int | None, sort: str) -> None:
    """The address says what the widgets show: `step` (None: the latest, left out) and `sort`."""
    said = (None if step is None else str(int(step)), sort)
    for name, value in zip(("step", "sort"), said):
        if value is None:
            st.query_params.pop(name, None)
        elif st.query_params.get(name) != value:
            st.query_params[name] = value
    st.session_state[ADDRESS_KEY] = said


def figure_text(sort: str, value) -> str:
    """' · KL 0.012': a group's figure for the option label ('' when it has none)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return t("groups_order.figure", name=t(f"groups_order.short.{sort}"), value=group_order.formatted_figure(sort, value))


def picker(run: str, step: int, asked: int | None, where) -> tuple[str, dict[int, str]]:
    """The ordering picker for `step`, drawn in the container `where`; returns (the ordering used,
    group -> its figure's text, in that order). An ordering the run cannot give (no per-sample column
    and no token detail) is said in one line and the step's own order is used."""
    key = per_language(SORT_KEY)
    if st.session_state.get(key) not in group_order.SORTS:
        st.session_state[key] = group_order.GROUP
    names = sort_names()
    sort = where.selectbox(t("groups_order.pick"), list(names), format_func=names.get, key=key,
                           help=t("groups_order.help"))
    write_address(asked, sort)
    if sort == group_order.GROUP:
        return sort, {}
    groups, problems = queries.group_figures(run, step)
    ui.warn(problems)
    if not group_order.available(groups, sort):
        where.caption(t("groups_order.unavailable", name=names[sort]))
        return group_order.GROUP, {}
    ranked = group_order.ordered(groups, sort)
    where.caption(t(f"groups_order.explain.{sort}"))
    first = min(SHARE_FIRST, len(ranked))
    if (share := group_order.carried(ranked, sort, first)) is not None:
        where.caption(t("groups_order.carried", n=first, share=f"{share:.0%}", name=t(f"groups_order.short.{sort}")))
    if ranked[sort].isna().any():  # the tokens table's figure: only the groups with token detail have it
        where.caption(t("groups_order.partial", n=int(ranked[sort].notna().sum()), total=len(ranked)))
    return sort, {int(r["group"]): figure_text(sort, r[sort]) for _, r in ranked.iterrows()}
