"""Texts too long to draw whole on a page, and each one whole on request.

A Groups page with a 1 MB completion took 15 s to draw: the table's cell held all of it (behind a
<details>), and the browser laid it out on every draw. The rule, for every view of run text: a text
of more than markup.WHOLE_CHARS characters is drawn cut, its length and "show all" beside the cut
(markup.cut_text), and the view lists it below with `offer`: one expander per text, which makes a
download of that one text and a box with all of it only once opened (a keyed expander's `open`),
so a page that nobody asks for the whole of stays small.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import pandas as pd
import streamlit as st

from grpo_lab.dashboard import markup
from grpo_lab.dashboard.i18n import t


class LongText(NamedTuple):
    label: str  # what it is, as the page names it: "prompt", "i=3 · completion"
    file_name: str  # its download's name
    text: str


def group_texts(rows: pd.DataFrame, stem: str) -> list[LongText]:
    """The texts of a group's samples (its prompt, each completion, reference answer and logged
    extra) that the page draws cut for their length, in sample order; `stem` starts their file names."""
    if rows.empty:
        return []
    prompt = [LongText(t("long_text.prompt"), f"{stem}-prompt.txt", str(rows["prompt"].iloc[0]))]
    out = prompt if "prompt" in rows else []
    columns = ["completion", "answer", *[c for c in rows.columns if c.startswith("extra/")]]
    for _, r in rows.sort_values("sample_idx").iterrows():
        i = int(r["sample_idx"])
        for column in columns:
            value = r.get(column)
            name = t("col.completion") if column == "completion" else column.removeprefix("extra/")
            if isinstance(value, str):  # a logged extra's name is run text: only safe characters in a file name
                out.append(LongText(f"i={i} · {name}", f"{stem}-i{i}-{re.sub(r'[^A-Za-z0-9_-]', '_', column)}.txt",
                                    value))
    return [x for x in out if len(x.text) > markup.WHOLE_CHARS]


def offer(texts: list[LongText], key: str) -> None:
    """Each text whole on request (nothing drawn for none): an expander per text, with a download
    and a box holding all of it, drawn only while the expander is open. `key` is the view's own
    (the run, step and group: a text opened in one group is not open in the next)."""
    if not texts:
        return
    st.markdown(f"**{t('long_text.heading')}**")
    for n, item in enumerate(texts):
        box = st.expander(t("long_text.row", what=markup.md(item.label), n=f"{len(item.text):,}"),
                          key=f"{key}_{n}", on_change="rerun")
        if box.open:
            with box:
                st.download_button(t("long_text.download"), data=item.text, file_name=item.file_name,
                                   mime="text/plain", on_click="ignore", key=f"{key}_{n}_download")
                st.code(item.text, language=None, wrap_lines=True, height=400)
