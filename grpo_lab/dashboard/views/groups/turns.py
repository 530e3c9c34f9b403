"""A tool rollout turn by turn on the Groups page: the model's text, then each tool call (which
tool, its arguments, the result it appended, how long it ran, its error) set apart from it.

Reads the samples table's `turns` column (runs with tools; docs/run-directory.md). Everything
shown is run text, escaped (markup.cut_text / html.escape), never rendered as markup.
"""

from __future__ import annotations

import html
import json

import pandas as pd
import streamlit as st

from grpo_lab.dashboard import markup, ui
from grpo_lab.dashboard.i18n import t
from grpo_lab.rundir import json_file

CALL_STYLE = "margin:2px 0 2px 1.5em;padding:2px 8px;border-left:3px solid #6c8ebf;background:#eef3fa;font-family:monospace"
ERROR_STYLE = "margin:2px 0 2px 1.5em;padding:2px 8px;border-left:3px solid #c0504d;background:#fbeaea;font-family:monospace"


def _arguments(arguments: dict) -> str:
    """A tag call's one argument (key "") as itself; JSON arguments as key=value."""
    if set(arguments) == {""}:
        return str(arguments[""])
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in arguments.items())


class BadCell(ValueError):
    """A `turns` cell that is not JSON, or is nested too deep to read (json_file's limits)."""


def read_turns(cell) -> list | None:
    """A samples row's `turns` cell as a list of turns; None when the row has none (NaN, not text);
    BadCell when the text cannot be read: not JSON, or a 100,000-deep `[[[...` whose parse would
    raise RecursionError. A table may come from elsewhere (an import), so a cell is input.

    >>> read_turns('[{"model": "hi"}]'), read_turns(None)
    ([{'model': 'hi'}], None)
    >>> read_turns("[" * 100_000)
    Traceback (most recent call last):
    ...
    grpo_lab.dashboard.views.groups.turns.BadCell: turns is nested deeper than 64 levels, so it is not read
    """
    if not isinstance(cell, (str, bytes)):
        return None
    try:
        turns = json_file.parse(cell, "turns")
    except json_file.JsonFileError as exc:
        raise BadCell(str(exc)) from None
    return turns if isinstance(turns, list) else None


def turns_html(turns: list[dict], markers: bool) -> str:
    """One rollout's turns as HTML: model text inline, each call and its result on its own line. A
    turn's model text that is empty (the model went on right after a tool's result) is left out; an
    empty rollout still shows as empty."""
    parts = []
    for k, turn in enumerate(turns):
        if not isinstance(turn, dict):
            continue
        if turn.get("model") or (k == 0 and "tool" not in turn):
            parts.append(f'<div class="grpo-turn-model">{markup.cut_text(turn.get("model", ""), markers)}</div>')
        if "tool" not in turn:
            continue
        call = f'{html.escape(str(turn["tool"]))}({html.escape(_arguments(turn.get("arguments") or {}))})'
        seconds = ("" if turn.get("seconds") is None  # not logged (a TRL run's turns)
                   else f' <span style="opacity:.6">{float(turn["seconds"]):.3f} s</span>')
        if turn.get("error") is not None:
            parts.append(f'<div class="grpo-turn-error" style="{ERROR_STYLE}">🔧 {call} → '
                         f'{html.escape(t("turns.error"))}: {html.escape(str(turn["error"]))}{seconds}</div>')
        else:
            parts.append(f'<div class="grpo-turn-tool" style="{CALL_STYLE}">🔧 {call} → '
                         f'{markup.cut_text(turn.get("result", ""), markers)}{seconds}</div>')
    return "".join(parts)


def show(group: pd.DataFrame, markers: bool) -> None:
    """The group's rollouts as turns, highest advantage first; nothing for a run without tools."""
    if "turns" not in group or group["turns"].isna().all():
        return
    with st.expander(t("turns.heading"), expanded=True):
        st.caption(t("turns.caption"))
        rows, bad = [], []
        for _, r in group.sort_values(["advantage", "sample_idx"], ascending=[False, True]).iterrows():
            try:
                turns = read_turns(r["turns"])
            except BadCell:
                bad.append(str(r["sample_idx"]))
                continue
            if turns is None:
                continue  # a row without turns (never written so by the trainer)
            rows.append(f'<div class="grpo-turns" style="margin-bottom:8px">'
                        f'{markup.response_chip(r["sample_idx"], r["advantage"])}{turns_html(turns, markers)}</div>')
        if bad:  # one line for the cells that could not be read; the other rollouts are shown
            ui.warn([t("turns_cell.unreadable", samples=", ".join(bad))])
        st.html("".join(rows))
