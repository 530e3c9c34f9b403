"""From a symptom to its groups: the Groups address a Live curve point or a run-doctor finding opens.

`/groups?run=R&step=S&sort=kl`: step S of run R, its groups by their share of the metric (which curve or
finding opens which ordering is rundir/group_order.py's ORDERS and FINDING_METRICS, declared once).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from grpo_lab.dashboard import pages
from grpo_lab.dashboard.views import series
from grpo_lab.rundir import group_order


def address(run: str, step: int, columns: tuple[str, ...] | list[str] = (), sort: str | None = None) -> dict[str, str]:
    """The query parameters of Groups at `step`, ordered by `sort` or by what a curve of `columns` opens
    (no `sort` when none fits: the step's own order).

    >>> address("demo", 140, ("kl/mean",))
    {'run': 'demo', 'step': '140', 'sort': 'kl'}
    >>> address("demo", 3, ("grad/norm",))
    {'run': 'demo', 'step': '3'}
    """
    sort = sort or group_order.sort_for_panel(columns)
    return {"run": run, "step": str(int(step)), **({"sort": sort} if sort else {})}


def finding_address(run: str, step: int, kind: str) -> dict[str, str]:
    """Groups at a finding's step, in the ordering that shows its cause (group_order.FINDING_METRICS)."""
    return address(run, step, sort=group_order.sort_for_finding(kind))


def url(params: dict[str, str]) -> str:
    """The page's address for `params`, as a shareable path (/groups?run=...).

    >>> url({"run": "demo", "step": "3"})
    '/groups?run=demo&step=3'
    """
    from urllib.parse import urlencode  # noqa: PLC0415 - one call site

    return f"/{pages.PAGES['groups'].address}?" + urlencode(params)


def step_at(scalars: pd.DataFrame, x_mode: str, x: float) -> int:
    """The logged step whose x (a step, or minutes with x_mode wall) is nearest to `x`."""
    xs = series.x_values(scalars, x_mode)
    return int(scalars["step"].iloc[int(np.nanargmin(np.abs(xs - x)))])
