"""Live's chart subtitles in both languages: plain text (no literal backticks), and where a figure alone
says nothing (ratio/max, a flat advantage/min, reward/mean hidden under its one reward), what a healthy
run reads there."""

import pytest
import streamlit as st

from grpo_lab.dashboard.i18n import texts
from grpo_lab.dashboard.views import metrics
from grpo_lab.rundir import metrics as registry


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_subtitles_are_plain_text_and_say_what_is_normal(monkeypatch, lang):
    monkeypatch.setitem(st.session_state, "lang", lang)
    columns = sorted({n for p in registry.PANELS for n in p.names if "<" not in n})
    panels = {p.title: p for p in metrics.panels(columns)}
    assert not [p.title for p in panels.values() if "`" in " ".join(p.help)]
    for panel in ("ratio", "advantage", "reward"):
        drawn = panels[texts(lang)[f"panel.{panel}.title"]]
        assert " ".join(drawn.help).replace(" ", "").find(texts(lang)[f"panel.{panel}.normal"][:20].replace(" ", "")) >= 0
    assert "2.65" in " ".join(panels[texts(lang)["panel.advantage.title"]].help)
