"""What the browser tests share: the streamlit server, waiting for a page, the language switch, and
what a page must not show (an exception, a failure line, English left over in the Chinese page).

(A module of its own, not conftest.py: tests/conftest.py is a conftest too, and `from conftest import`
would depend on which of the two was loaded last.)
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import expect

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))  # trainer_helpers, also when only tests/dashboard/browser is collected
from trainer_helpers import free_port, wait_until  # noqa: E402

LOCALES = ROOT / "grpo_lab" / "dashboard" / "locales"
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
EXCEPTION = "[data-testid=stException]"
MAIN = "[data-testid=stMainBlockContainer]"


# --- the server ---------------------------------------------------------------------------------

@contextlib.contextmanager
def streamlit_server(runs: Path):
    """`streamlit run grpo_lab/dashboard/app.py` on a free port over the runs folder `runs`; yields its url once
    the server answers its health check."""
    port = free_port()
    log = open(runs.parent / "streamlit.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "grpo_lab" / "dashboard" / "app.py"),
                             "--server.port", str(port), "--server.headless", "true", "--server.address", "127.0.0.1",
                             "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
                            cwd=ROOT, env={**os.environ, "GRPO_LAB_RUNS_DIR": str(runs), "PYTHONPATH": str(ROOT)},
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until_healthy(f"http://127.0.0.1:{port}", runs)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_server(proc)
        log.close()


def stop_server(proc: subprocess.Popen, timeout: float = 30) -> None:
    """A dashboard server ended: asked first (its scheduler ends with it), killed after `timeout` s."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stop_trainers(runs: Path, *names: str) -> None:
    """End the trainers the tests launched through the dashboard (their pids are on record): those of
    `names`, or every one. A launched run left going would take a core from every test after it."""
    from grpo_lab.launching import launch_records, process_control
    from grpo_lab.rundir.layout import read_json

    for name in launch_records.record_names(runs):
        data = read_json(runs / launch_records.LAUNCH_DIR / f"{name}.json") or {}
        if (not names or name in names) and process_control.is_trainer_of(data.get("pid"), name):
            os.kill(data["pid"], signal.SIGKILL)


def wait_until_healthy(url: str, runs: Path, timeout: float = 120) -> None:
    """Until streamlit answers its health check; fails with the end of its log."""
    def healthy() -> bool:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                return True
        except OSError:
            return False

    try:
        wait_until(healthy, timeout, "streamlit's health check", every=0.3)
    except AssertionError as exc:
        raise RuntimeError(f"streamlit did not start ({exc}): "
                           + (runs.parent / "streamlit.log").read_text()[-2000:]) from None


# --- a page -------------------------------------------------------------------------------------

def wait_idle(page, timeout: float = 60_000) -> None:
    """Until Streamlit has finished running the script. Read from the app's script-state attribute:
    the 'Running...' status widget shows only after 500 ms of running (Streamlit 1.67's frontend),
    so a short run, or the first 500 ms of a long one, looked idle and its elements were read stale."""
    page.wait_for_selector("[data-testid=stApp]")
    page.wait_for_timeout(300)  # a run that a click asked for may not have started yet
    page.wait_for_function("['notRunning', 'compilationError'].includes("
                           "document.querySelector('[data-testid=stApp]')?.dataset.testScriptState)", timeout=timeout)


def click_until(page, target, expected, tries: int = 3) -> None:
    """Click `target` until `expected` shows: a click can land before its widget is wired."""
    for attempt in range(tries):
        target.click()
        try:
            expected.wait_for(timeout=10_000)
            return
        except Exception:  # noqa: BLE001 - retried, then the last error is raised
            if attempt == tries - 1:
                raise


def open_expander(page, title: str, tries: int = 3):
    """Open the expander headed `title` (exactly) and return it. A click can be lost (a fresh clone's run
    left the launch form's "More options" shut): click again, but only while it is shut, since a click on
    an open one closes it. Nested expanders are told apart by their own summary."""
    details = page.locator("details").filter(has=page.locator("> summary").get_by_text(title, exact=True))
    summary = details.locator("> summary")
    for attempt in range(tries):
        if not details.evaluate("d => d.open"):
            summary.click()
        try:
            page.wait_for_function("d => d.open", arg=details.element_handle(), timeout=10_000)
            return details
        except PlaywrightTimeoutError:
            if attempt == tries - 1:
                raise
    return details


def choose(opener, option, tries: int = 3) -> None:
    """Open `opener`'s list and click `option`. A rerun that lands between the two closes the list,
    and a click on the option it took away waits for good (seen in a full suite): open it again."""
    for attempt in range(tries):
        if not option.is_visible():
            opener.click()
        try:
            option.click(timeout=10_000)
            return
        except PlaywrightTimeoutError:
            if attempt == tries - 1:
                raise


def type_to_choose(page, box, text: str, tries: int = 3) -> None:
    """Type `text` into select box `box`, then Enter once the list shows only that option; for a
    list that opens past the viewport's edge, where an option cannot be clicked. A rerun landing
    between the typing and the Enter closes the list and keeps the typed text, so the Enter picks
    nothing (seen under load). Typed text stays in the box until it loses focus, so the choice is
    checked after a blur, which puts back the chosen value (tried on Streamlit 1.67: typed, blurred,
    the box reads the old choice; typed, Enter, blurred, the new one); if it is not `text`, again."""
    for attempt in range(tries):
        box.click()
        box.fill(text)
        try:
            expect(page.get_by_role("option")).to_have_text([text], timeout=10_000)
            box.press("Enter")
            box.blur()
            expect(box).to_have_value(text, timeout=10_000)
            return
        except AssertionError:
            if attempt == tries - 1:
                raise
            box.press("Escape")


class Traffic:
    """What a page and its Streamlit server said over the websocket, in order: each rerun the page
    asked for (its fragment, and the button or submit triggers it carried) and each script run the
    server started. Made before the page's first goto, so that it sees the websocket open (the `traffic`
    fixture)."""

    def __init__(self, page):
        self.page = page
        self.events: list[tuple] = []  # ("rerun", fragment id, trigger ids) or ("run",)
        page.on("websocket", self._watch)

    def _watch(self, ws) -> None:
        ws.on("framesent", self._sent)
        ws.on("framereceived", self._received)

    def _sent(self, payload) -> None:
        from streamlit.proto.BackMsg_pb2 import BackMsg

        if isinstance(payload, (bytes, bytearray)):
            msg = BackMsg()
            msg.ParseFromString(bytes(payload))
            if msg.WhichOneof("type") == "rerun_script":
                widgets = msg.rerun_script.widget_states.widgets
                triggers = tuple(w.id for w in widgets if w.WhichOneof("value") == "trigger_value" and w.trigger_value)
                self.events.append(("rerun", msg.rerun_script.fragment_id, triggers))

    def _received(self, payload) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        if isinstance(payload, (bytes, bytearray)):
            msg = ForwardMsg()
            msg.ParseFromString(bytes(payload))
            if msg.WhichOneof("type") == "new_session":  # the server started a script run
                self.events.append(("run",))


def press(traffic: Traffic, button, tries: int = 3) -> None:
    """Click `button`, a form's submit or a plain button, until the page has sent the rerun that carries
    its trigger, then wait for the server to start the script run that reads it. The page sends it inside
    the click's own handler, so a click after which none went out is a click the page lost (or a form check
    refused: then every try sends none, and this fails saying so); it is clicked again. A rerun sent that
    starts no run was dropped by the server, and fails here as such, not later as an effect that never
    shows. (CI saw clicks come to nothing on loaded machines: forms left filled, an expander left shut.)"""
    page = traffic.page
    label = button.inner_text().strip()
    in_form = button.evaluate("b => !!b.closest('[data-testid=stForm]')")

    def carries(triggers: tuple[str, ...]) -> bool:
        if in_form:  # a form's submit is named by its form and label
            return any("FormSubmitter:" in t and t.endswith(f"-{label}") for t in triggers)
        return bool(triggers)  # a plain button's id is a hash; a click sends its trigger and no other

    for attempt in range(tries):
        seen = len(traffic.events)
        button.click()
        sent = None
        for _ in range(100):  # 10 s; the events are delivered while Playwright waits
            sent = next((i for i, e in enumerate(traffic.events[seen:], seen) if e[0] == "rerun" and carries(e[2])),
                        None)
            if sent is not None:
                break
            page.wait_for_timeout(100)
        if sent is not None:
            break
        if attempt == tries - 1:
            raise AssertionError(f"{tries} clicks on {label!r} sent nothing; the page sent {traffic.events[seen:]}")
    for _ in range(600):  # 60 s
        if any(e[0] == "run" for e in traffic.events[sent + 1:]):
            return
        page.wait_for_timeout(100)
    fragment = traffic.events[sent][1]
    raise AssertionError(f"{label!r} was clicked (fragment {fragment or 'none'}) and the server started no run "
                         "for it in 60 s")


def grid_rows(grid, *headings: str, cells: bool = True) -> tuple[list[str], list[list[str]]]:
    """(headings, rows of cell texts) of an st.dataframe: a canvas whose cells are in its accessible table.
    Waits for a column headed by each of `headings` (and, with `cells`, for a first cell): after a rerun,
    such as a language switch, the grid redraws once the script has finished, so for a moment its table
    still holds the last run's words."""
    if cells:
        expect(grid.locator("td[role=gridcell]").first).to_be_attached()
    for heading in headings:
        expect(grid.locator("thead th").get_by_text(heading, exact=True).first).to_be_attached()
    return grid.locator("thead th").all_inner_texts(), [r.locator("td").all_inner_texts()
                                                        for r in grid.locator("tbody tr").all()]


def to_chinese(page, heading: str) -> None:
    """Pick 中文 in the sidebar's language switch; returns once the page's h1 reads `heading`."""
    click_until(page, page.get_by_text("中文", exact=True), page.locator("h1").filter(has_text=heading))
    wait_idle(page)


def open_groups(page, url: str, run: str, lang: str) -> tuple[int, int]:
    """Groups on `run`, in `lang`; the (step, group) its first group heading names once it is drawn."""
    page.goto(f"{url}/groups?run={run}")
    wait_idle(page)
    if lang == "zh":
        to_chinese(page, locale("zh")["nav.groups"])
    heading = page.locator("h3").filter(has_text=re.compile(r"\d+ .*·.*\d+ .*·")).first  # groups.heading
    expect(heading).to_be_visible()
    step, group = (int(n) for n in re.findall(r"\d+", heading.inner_text())[:2])
    return step, group


def main_text(page) -> str:
    """The text of the page's main area as a reader sees it, without code blocks (logs, configs)."""
    return page.locator(MAIN).first.evaluate(
        "e => { const c = e.cloneNode(true); c.querySelectorAll('pre, code, [data-testid=stCode]')"
        ".forEach(x => x.remove()); document.body.appendChild(c); const s = c.innerText; c.remove(); return s; }")


# --- what must not show -------------------------------------------------------------------------

@functools.cache
def locale(code: str) -> dict[str, str]:
    return yaml.safe_load((LOCALES / f"{code}.yaml").read_text(encoding="utf-8"))


def _fragments(text: str) -> list[str]:
    """A text's literal parts (around its {placeholders}), without markdown marks and edge punctuation."""
    parts = (re.sub(r"[*`]", "", p) for p in re.split(r"\{[^}]*\}", text))
    return [p.strip(" \n:;,.·()[]—–-…!?✅❌：；，。、（）") for p in parts]


@functools.cache
def english_only_phrases() -> tuple[str, ...]:
    """English phrases of the UI (two words or more, 10+ characters) that no Chinese text contains:
    one of them in a Chinese page is a text that fell back to English (zh.yaml lacks its key)."""
    en, zh = locale("en"), locale("zh")
    chinese = "\n".join(zh.values())
    phrases = {f for k, v in en.items() if zh.get(k) != v for f in _fragments(v)
               if len(f) >= 10 and " " in f and f not in chinese}
    return tuple(sorted(phrases))


def literal(key: str, code: str = "en") -> str:
    """The longest literal part of a text (what a page shows of it whatever its placeholders hold)."""
    return max(_fragments(locale(code)[key]), key=len)


def page_failed_marks() -> list[str]:
    """The literal parts of ui.page_failed (what ui.guard shows when a page raises, e.g. the KeyError
    of a key that en.yaml lacks), in every language."""
    return [literal("ui.page_failed", code) for code in ("en", "zh")]


def assert_page_whole(page, chinese: bool = False, settle_s: float = 10.0) -> None:
    """No exception box, no 'page hit a problem' line, and in Chinese no English left over.

    A language switch can rerun the page once more (a widget refilled from the address, a picker's
    new key): until that run ends, elements of the English draw may stand. English is an error only
    if it is still there `settle_s` later, with the page idle."""
    deadline = time.monotonic() + settle_s
    while True:
        assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).first.inner_text()
        text = main_text(page)
        failed = [m for m in page_failed_marks() if m in text]
        assert not failed, text[:2000]
        english = [p for p in english_only_phrases() if p in text] if chinese else []
        if not english:
            return
        assert time.monotonic() < deadline, f"English in the Chinese page: {english}"
        page.wait_for_timeout(500)
        wait_idle(page)
