"""Groups' step buttons: one logged step back or on, and a jump to the previous or next step where the run
doctor recorded a finding (tables/events), in the ordering that shows its cause (group_order.FINDING_METRICS).

Clicking a curve to hit one step of a long run is hard (the tooltip jumps 164 -> 166 -> 168); these move
the step picker itself, so the ordering picker and the address follow as they do after a typed step.
The buttons act in callbacks: they set the widgets' state before the next run draws them.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from grpo_lab.dashboard import markup
from grpo_lab.dashboard.i18n import per_language, t
from grpo_lab.dashboard.reading import data
from grpo_lab.dashboard.views.groups import groups_order
from grpo_lab.rundir import group_order

STEP_KEY = "groups_step"  # groups_view's step picker
SEVERITIES = ("critical", "warning", "info")  # the worst first: the finding a step's jump opens


def neighbour(steps: list[int], step: int, direction: int) -> int | None:
    """The logged step before (`direction` -1) or after (+1) `step`; None past either end.

    >>> neighbour([2, 4, 6], 4, -1), neighbour([2, 4, 6], 5, 1), neighbour([2, 4, 6], 6, 1)
    (2, 6, None)
    """
    side = [s for s in steps if (s < step if direction < 0 else s > step)]
    return (max(side) if direction < 0 else min(side)) if side else None


def worst_by_step(found: pd.DataFrame) -> dict[int, pd.Series]:
    """Each step with a finding -> its worst finding (critical before warning before info), by step.

    >>> found = pd.DataFrame({"step": [5, 5, 9], "kind": ["no_signal", "kl_explosion", "grad_explosion"],
    ...                       "severity": ["info", "critical", "warning"]})
    >>> {s: r["kind"] for s, r in worst_by_step(found).items()}
    {5: 'kl_explosion', 9: 'grad_explosion'}
    """
    if found.empty:
        return {}
    rank = found["severity"].map({s: i for i, s in enumerate(SEVERITIES)}).fillna(len(SEVERITIES))
    ordered = found.assign(_rank=rank).sort_values(["step", "_rank"], kind="stable")
    return {int(step): rows.iloc[0] for step, rows in ordered.groupby("step", sort=True)}


def _go(step: int, sort: str | None = None) -> None:
    key = per_language(groups_order.SORT_KEY)
    st.session_state[STEP_KEY] = step
    if sort is not None:
        st.session_state[key] = sort
    # the address too, now: a click sent before the last move's address reached the browser carries the
    # older address, which follow_address would otherwise take for a new link and go back to
    groups_order.write_address(step, st.session_state.get(key) or group_order.GROUP)


def _finding_sort(kind: str) -> str:
    return group_order.sort_for_finding(kind) or group_order.GROUP


def show(run: str, steps: list[int], step: int) -> None:
    """The buttons under the step picker for the shown `step` of the run's logged `steps`, and the
    finding recorded at this step, if any."""
    back, on = neighbour(steps, step, -1), neighbour(steps, step, 1)
    findings = worst_by_step(data.events(run))
    cols = st.columns([1, 1, 2, 2] if findings else [1, 1, 4])
    cols[0].button(t("groups.prev_step"), key="groups_prev_step", disabled=back is None, on_click=_go, args=(back,),
                   width="stretch")
    cols[1].button(t("groups.next_step"), key="groups_next_step", disabled=on is None, on_click=_go, args=(on,),
                   width="stretch")
    if not findings:
        return
    for col, direction, name in ((cols[2], -1, "prev"), (cols[3], 1, "next")):
        target = neighbour(list(findings), step, direction)
        kind = None if target is None else str(findings[target]["kind"])
        label = (t(f"groups.{name}_finding_none") if target is None
                 else t(f"groups.{name}_finding", step=target, kind=markup.md(kind)))
        col.button(label, key=f"groups_{name}_finding", disabled=target is None, help=t("groups.finding_nav_help"),
                   on_click=_go, args=(target, None if kind is None else _finding_sort(kind)),
                   width="stretch")
    if (here := findings.get(int(step))) is not None:  # run text: never markup
        st.caption(t("groups.finding_here", icon=data.SEVERITY_ICONS.get(here["severity"], ""),
                     kind=markup.md(str(here["kind"])), message=markup.md(str(here["message"]))))
