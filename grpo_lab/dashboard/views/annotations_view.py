"""A run's tags and note: edited on the Runs page, one line per run on Compare (rundir/annotations.py).

Both are a person's text read back from disk: shown escaped (markup.md), never as markdown of their own.
"""

from __future__ import annotations

import streamlit as st

from grpo_lab.dashboard import ui
from grpo_lab.dashboard.i18n import t
from grpo_lab.dashboard.views import markup
from grpo_lab.rundir import annotations
from grpo_lab.rundir.reader import RunInfo


def tags_text(tags) -> str:
    """Tags as inline code (`a` `b`), or '' when there are none."""
    return " ".join(markup.code(tag) for tag in tags)


def editor(info: RunInfo) -> None:
    """The tags and note of one run, in a form: nothing is written until Save, and bad tags are
    refused with the checker's one line."""
    current = annotations.read(info.path)
    ui.warn(current.problems)
    with st.form(key=f"annotate_{info.name}", border=False):
        tags = st.text_input(t("annotations.tags"), value=" ".join(current.tags), key=f"annotate_tags_{info.name}",
                             help=t("annotations.tags_help"), placeholder=t("annotations.tags_placeholder"))
        note = st.text_area(t("annotations.note"), value=current.note, key=f"annotate_note_{info.name}",
                            max_chars=annotations.MAX_NOTE_CHARS, height=90)
        if st.form_submit_button(t("annotations.save")):
            try:
                annotations.write(info.path, tags, note)
            except annotations.AnnotationError as exc:
                st.error(markup.md(str(exc)))
            else:  # rerun: the filters above must offer a tag that is new now; the message survives it
                st.session_state["runs_message"] = ("success", t("annotations.saved", name=info.name))
                st.rerun()


def compare_lines(runs: list[RunInfo]) -> None:
    """One caption line per run that has tags or a note; nothing when none has."""
    lines = []
    for r in runs:
        found = annotations.read(r.path)
        if found.tags or found.note:
            note = markup.md(" ".join(found.note.split()))  # one line: a note's newlines would break the list
            lines.append(t("annotations.compare_line", name=markup.md(r.name),
                           tags=tags_text(found.tags) or t("annotations.no_tags"), note=note or "—"))
    if lines:
        st.caption("  \n".join(lines))
