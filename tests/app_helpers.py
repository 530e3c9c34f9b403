"""The dashboard under Streamlit's AppTest: open a page as a visitor would, and read what it shows."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from grpo_lab.dashboard import pages

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "grpo_lab" / "dashboard"
APP = str(DASHBOARD / "app.py")


def open_page(page: str, run: str | None = None, lang: str = "en", **state) -> AppTest:
    """The whole app (navigation, language switch) on `page` (pages.py), with `run` remembered
    as the last opened run and `state` preset; fails on an exception or a page that gave up."""
    at = AppTest.from_file(APP, default_timeout=60)
    if lang != "en":
        at.session_state["lang"] = lang
    at.run()
    if run:
        at.session_state["run"] = run
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(pages.path(page))
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert not [e.value for e in at.error if "hit a problem" in str(e.value)]
    return at


def page_alone(name: str, lang: str = "en", timeout: float = 60) -> AppTest:
    """One page script run on its own (the concept pages), in `lang`."""
    at = AppTest.from_file(str(DASHBOARD / pages.path(name)), default_timeout=timeout)
    if lang != "en":
        at.session_state["lang"] = lang
    return rerun(at)


def rerun(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def live_open(*sections: str) -> dict[str, bool]:
    """Session state that opens Live's closed sections (every one when none is named), as a click would:
    only the overview is drawn on first paint (grpo_lab/dashboard/views/live/live_view.py)."""
    from grpo_lab.dashboard.views import metrics
    from grpo_lab.dashboard.views.live import live_view

    return {live_view.open_key(s): True for s in sections or (*metrics.SECTIONS[1:], live_view.HISTOGRAM)}


def texts(elements) -> str:
    return " ".join(str(e.value) for e in elements)


def html_bodies(at: AppTest) -> str:
    return " ".join(e.proto.body for e in at.get("html"))


def charts(at: AppTest) -> list:
    return at.get("vega_lite_chart")
