"""A run's tags and note: edited on the Runs page, one line per run on Compare (rundir/annotations.py).

Both are a person's text read back from disk: shown escaped (markup.md), never as markdown of their own.
"""

from __future__ import annotations

import time

import streamlit as st

from grpo_lab.dashboard import markup, ui
from grpo_lab.dashboard.i18n import t
from grpo_lab.dashboard.reading import data
from grpo_lab.rundir import annotations
from grpo_lab.rundir.reader import RunInfo


def tags_text(tags) -> str:
    """Tags as inline code (`a` `b`), or '' when there are none."""
    return " ".join(markup.code(tag) for tag in tags)


def editor(info: RunInfo) -> None:
    """The tags and note of one run, in a form: nothing is written until Save, and bad tags are
    refused with the checker's one line. Save is a callback, so it runs before the script: the Runs
    page redraws itself whole when a run starts or ends (runs_view.render), and a submit read by the
    script would be lost to that redraw. Its confirmation (or refusal) stays under the form until the
    next save, not for one refresh of a page that refreshes every 2 s."""
    current = annotations.read(info.path)
    ui.warn(current.problems)
    with st.form(key=f"annotate_{info.name}", border=False):
        st.text_input(t("annotations.tags"), value=" ".join(current.tags), key=f"annotate_tags_{info.name}",
                      help=t("annotations.tags_help"), placeholder=t("annotations.tags_placeholder"))
        st.text_area(t("annotations.note"), value=current.note, key=f"annotate_note_{info.name}",
                     max_chars=annotations.MAX_NOTE_CHARS, height=90)
        st.form_submit_button(t("annotations.save"), on_click=save, args=(info.name, str(info.path)))
    kind, message = st.session_state.get(f"annotate_said_{info.name}", (None, None))
    if message:
        (st.success if kind == "success" else st.error)(markup.md(message))


def save(name: str, path: str) -> None:
    """Form callback: write the form's values (from session state) and keep what happened to say."""
    tags = st.session_state.get(f"annotate_tags_{name}", "")
    note = st.session_state.get(f"annotate_note_{name}", "")
    try:
        stored = annotations.write(path, tags, note)
    except annotations.AnnotationError as exc:
        said = ("error", str(exc))
    else:
        said = ("success", t("annotations_save.saved_at", name=name, time=time.strftime("%H:%M:%S"),
                             tags=" ".join(stored.tags) or t("annotations.no_tags")))
    st.session_state[f"annotate_said_{name}"] = said
    data.forget_runs()  # the listing's tags are looked at again now, not a second later
    st.session_state["runs_full_rerun"] = True  # the tag filter must offer a tag that is new now


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
