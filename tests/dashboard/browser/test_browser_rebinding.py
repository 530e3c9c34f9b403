"""DNS rebinding in a real browser: Chromium resolves evil.test to 127.0.0.1 (a host-resolver rule,
as a rebinding attacker's DNS would), so the page has a loopback peer but a foreign Host.

- A server started as the browser tests start one (any Host accepted by Streamlit): the page gate
  shows the token prompt under evil.test, the runs under 127.0.0.1; the accepted token leaves the page.
- A server started by `grpo-lab-dashboard` (serve.command: server.allowedHosts pinned to this
  server's names): Streamlit refuses evil.test's WebSocket itself, so no script runs at all.
"""

from __future__ import annotations

import contextlib
import os
import subprocess

import pytest
from browser_helpers import CHROMIUM, CHROMIUM_ARGS, ROOT, free_port, streamlit_server, wait_until_healthy

from grpo_lab.dashboard import access, serve
from grpo_lab.rundir.layout import write_json_atomic

pytestmark = pytest.mark.browser
TOKEN = "rebinding-test-token"
RUN = "secret-run-name"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rebinding") / "runs"
    write_json_atomic(folder / RUN / "status.json", {"state": "finished", "pid": 0, "step": 1, "total_steps": 1})
    return folder


@contextlib.contextmanager
def environ(**values):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


@pytest.fixture(scope="module")
def rebinding_browser(playwright_driver):
    b = playwright_driver.chromium.launch(executable_path=CHROMIUM, headless=True,
                                          args=[*CHROMIUM_ARGS, "--host-resolver-rules=MAP evil.test 127.0.0.1"])
    yield b
    b.close()


@pytest.fixture
def open_as(rebinding_browser):
    contexts = []

    def open_(url):
        context = rebinding_browser.new_context(viewport={"width": 1400, "height": 1000})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(60_000)
        page.goto(url)
        return page

    yield open_
    for context in contexts:
        context.close()


def test_a_page_under_another_host_name_gets_the_token_prompt(runs, open_as):
    with environ(**{access.TOKEN_ENV: TOKEN, access.ALLOWED_HOSTS_ENV: ""}), streamlit_server(runs) as url:
        port = url.rsplit(":", 1)[1]
        local = open_as(url)
        local.get_by_text(RUN).first.wait_for(state="attached")  # 127.0.0.1: the runs table (a canvas; cells hidden)

        page = open_as(f"http://evil.test:{port}/")
        prompt = page.get_by_label("Access token")
        prompt.wait_for()
        assert RUN not in page.content()
        prompt.fill("wrong")
        prompt.press("Enter")
        page.get_by_text("Wrong token.").wait_for()
        prompt.fill(TOKEN)
        prompt.press("Enter")
        page.get_by_text(RUN).first.wait_for(state="attached")
        assert page.get_by_label("Access token").count() == 0 and TOKEN not in page.content()


def test_serve_refuses_the_websocket_of_a_foreign_host(runs, open_as):
    port = free_port()
    log = open(runs.parent / "serve.log", "wb")
    env = {**os.environ, "GRPO_LAB_RUNS_DIR": str(runs), "PYTHONPATH": str(ROOT), access.TOKEN_ENV: TOKEN}
    env.pop(access.ALLOWED_HOSTS_ENV, None)
    proc = subprocess.Popen(serve.command(["--server.port", str(port), "--server.fileWatcherType", "none"]),
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://localhost:{port}"
        wait_until_healthy(url, runs)
        open_as(url).get_by_text(RUN).first.wait_for(state="attached")  # its own name: the runs

        page = open_as(f"http://evil.test:{port}/")
        page.wait_for_timeout(8_000)  # time enough for a WebSocket, a script run and a prompt
        html = page.content()
        prompts = page.get_by_label("Access token").count()
        assert RUN not in html and prompts == 0, page.locator("body").inner_text()[:500]
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()
