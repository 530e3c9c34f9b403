"""The access gate under DNS rebinding: a loopback peer counts as local only when it asked for this
server by one of its own names; wrong tokens are rate-limited; an accepted token leaves the page.
(The same, in a real browser with a host-resolver rule: tests/dashboard/browser/test_browser_rebinding.py.)"""

import pytest

from app_helpers import open_page
from grpo_lab.dashboard import access, serve
from grpo_lab.rundir.layout import write_json_atomic

TOKEN = "s3cret-token"


@pytest.mark.parametrize("header, name", [
    ("localhost:8501", "localhost"), ("LOCALHOST", "localhost"), ("[::1]:8501", "::1"), ("127.0.0.1", "127.0.0.1"),
    ("evil.test:8501", "evil.test"), ("localhost.:80", "localhost"), (None, None), ("", None),
    ("localhost:99999", None), ("user@localhost", None), ("localhost/x", None), ("![x](y)", None), ("a*b*", None),
])
def test_the_host_header_gives_one_name_or_none(header, name):
    assert access.host_name(header) == name


@pytest.mark.parametrize("ip, host, local", [
    ("127.0.0.1", "localhost:8501", True), ("127.0.0.1", "127.0.0.1:8501", True), ("::1", "[::1]:8501", True),
    ("127.0.0.1", "evil.test:8501", False),  # DNS rebinding: loopback peer, foreign name
    ("127.0.0.1", None, False),  # a request without Host is no local visit either
    ("10.0.0.5", "localhost:8501", False),  # another machine claiming to be localhost
    (None, "localhost:8501", True), (None, "evil.test:8501", False),  # Streamlit's loopback peer: ip None
    (None, None, True), (object(), None, True),  # no request at all (AppTest): no Host either
])
def test_a_local_visit_needs_a_loopback_peer_and_one_of_our_names(ip, host, local, monkeypatch):
    monkeypatch.delenv(access.ALLOWED_HOSTS_ENV, raising=False)
    assert access.is_local_visit(ip, host) is local


def test_the_configured_address_and_the_setting_add_names(monkeypatch):
    monkeypatch.delenv(access.ALLOWED_HOSTS_ENV, raising=False)
    assert not access.is_local_visit("127.0.0.1", "lab.local:8501")
    assert access.is_local_visit("127.0.0.1", "lab.local:8501", address="lab.local")
    monkeypatch.setenv(access.ALLOWED_HOSTS_ENV, " Lab.Local , box.lan")
    assert access.allowed_hosts() == {"localhost", "127.0.0.1", "::1", "lab.local", "box.lan"}
    assert access.is_local_visit("127.0.0.1", "box.lan:8501") and not access.is_local_visit("127.0.0.1", "evil.test")


def test_waits_start_after_five_wrong_tokens_and_double():
    assert [access.wait_after(n) for n in range(0, 9)] == [0, 0, 0, 0, 0, 1, 2, 4, 8]
    assert access.wait_after(100) == access.MAX_WAIT_S
    shared = access.Attempts(free=2)
    for _ in range(3):
        shared.failed(now=100.0)
    assert shared.wait_left(100.0) == 2.0 and shared.wait_left(103.0) == 0.0
    shared.reset()
    assert shared.wait_left(100.0) == 0.0


def test_serve_pins_allowed_hosts_only_when_listening_on_loopback(monkeypatch):
    monkeypatch.setenv(access.ALLOWED_HOSTS_ENV, "box.lan")
    pinned = serve.command([])
    hosts = {pinned[i + 1] for i, a in enumerate(pinned) if a == "--server.allowedHosts"}
    assert hosts == {"localhost", "127.0.0.1", "::1", "box.lan"}
    assert "--server.allowedHosts" not in serve.command(["--server.address", "0.0.0.0"])  # the page gate decides
    assert serve.command(["--server.allowedHosts", "mine"]).count("--server.allowedHosts") == 1  # the user's own


@pytest.fixture
def rebound(tmp_path, monkeypatch):
    """The app as a visitor from a page re-pointed at 127.0.0.1 sees it, over a runs folder with one run."""
    write_json_atomic(tmp_path / "secret-run" / "status.json", {"state": "finished", "pid": 0, "step": 1})
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    monkeypatch.delenv(access.ALLOWED_HOSTS_ENV, raising=False)
    monkeypatch.setattr(access, "_visitor", lambda st: (None, "evil.test:8501"))  # as Streamlit gives a loopback peer
    monkeypatch.setattr(access, "PROCESS_ATTEMPTS", access.Attempts())
    clock = [1000.0]
    monkeypatch.setattr(access, "_now", lambda: clock[0])
    return clock


def shown(at) -> str:
    return " ".join(str(e.value) for kind in (at.markdown, at.error, at.caption, at.title) for e in kind) + " ".join(
        str(d.value) for d in at.dataframe)


def test_a_rebound_page_without_a_token_set_is_refused(rebound, monkeypatch):
    monkeypatch.delenv(access.TOKEN_ENV, raising=False)
    at = open_page("runs")
    assert "evil.test" in at.error[0].value and access.ALLOWED_HOSTS_ENV in at.error[0].value
    assert "secret-run" not in shown(at) and not at.text_input and not at.button


def test_a_rebound_page_gets_the_token_prompt_then_waits_then_gets_in(rebound, monkeypatch):
    monkeypatch.setenv(access.TOKEN_ENV, TOKEN)
    at = open_page("runs")
    assert [w.key for w in at.text_input] == ["access_token"] and "secret-run" not in shown(at)
    for attempt in range(5):
        at.text_input(key="access_token").input(f"guess-{attempt}").run()
        assert at.error[0].value == "Wrong token." and at.text_input(key="access_token").value == ""
    at.text_input(key="access_token").input(TOKEN).run()  # the right token, but during the wait
    assert at.error[0].value.startswith("Too many wrong tokens: wait 1 s") and "secret-run" not in shown(at)
    rebound[0] += 2  # the wait is over
    at.text_input(key="access_token").input(TOKEN).run()
    assert not at.exception and "secret-run" in shown(at)
    assert "access_token" not in [w.key for w in at.text_input]  # the field, and the token with it, is gone
    assert at.session_state["access_token"] == ""
