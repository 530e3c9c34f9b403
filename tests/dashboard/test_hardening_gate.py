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
    # no peer address (Streamlit's agent API sessions have none) is not local, whatever Host it sends
    (None, "localhost:8501", False), (None, "evil.test:8501", False), (None, None, False),
    (access.SCRIPT_RUN, None, True), (object(), None, True),  # no server at all (AppTest): no Host either
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
        shared.failed("10.0.0.5", now=100.0)
    assert shared.wait_left("10.0.0.5", 100.0) == 2.0 and shared.wait_left("10.0.0.5", 103.0) == 0.0
    shared.reset("10.0.0.5")
    assert shared.wait_left("10.0.0.5", 100.0) == 0.0


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
    monkeypatch.setattr(access, "_visitor", lambda st: ("127.0.0.1", "evil.test:8501"))  # a loopback peer
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
    at.text_input(key="access_token").input("guess-5").run()  # a guess during the wait: not even tried
    assert at.error[0].value.startswith("Too many wrong tokens: wait 1 s") and "secret-run" not in shown(at)
    rebound[0] += 2  # the wait is over
    at.text_input(key="access_token").input(TOKEN).run()
    assert not at.exception and "secret-run" in shown(at)
    assert "access_token" not in [w.key for w in at.text_input]  # the field, and the token with it, is gone
    assert at.session_state["access_token"] == ""


def test_an_agent_api_session_has_no_peer_and_is_not_local(monkeypatch):
    """Streamlit 1.67's agent API runs the script for a request with no connection: its session's client
    context (runtime/agent/interaction.py _RequestContext) reports remote_ip None, as st.context.ip_address
    also reports for a loopback browser. The gate reads the raw peer, so the two differ."""
    from streamlit.runtime.agent.interaction import _RequestContext

    monkeypatch.delenv(access.ALLOWED_HOSTS_ENV, raising=False)
    agent = _RequestContext([("Host", "localhost:8501")])
    assert access.peer(agent) is None and not access.is_local_visit(access.peer(agent), "localhost:8501")

    class Browser:  # a WebSocket session's context: the TCP peer as the server saw it
        remote_ip = "127.0.0.1"

    assert access.peer(Browser()) == "127.0.0.1" and access.is_local_visit("127.0.0.1", "localhost:8501")


def test_wrong_guesses_slow_the_guesser_not_the_holder():
    """The waits are per session and per peer address: wrong tokens from one address make every session
    from it wait (a reload included), while the holder, from another address, is let in at once."""
    waits = access.Attempts(free=2, server_free=4)
    for _ in range(6):
        waits.failed("203.0.113.9", now=100.0)
    assert waits.wait_left("203.0.113.9", now=100.0) > 0  # the guesser, in any session of its own
    assert waits.wait_left("198.51.100.7", now=100.0) == 0  # the holder elsewhere: no wait
    # server-wide, past PROCESS_FREE_TRIES wrong tokens every other address gets one try before its own wait
    assert waits.wait_left("198.51.100.7", now=100.0) == 0
    waits.failed("198.51.100.7", now=100.0)
    assert waits.wait_left("198.51.100.7", now=100.0) > 0


def test_the_holder_gets_in_at_once_while_a_guesser_elsewhere_waits(rebound, monkeypatch):
    """Before, the wait after wrong tokens was the whole server's: the right token was refused for up to
    300 s, so anyone guessing could keep the holder out."""
    monkeypatch.setenv(access.TOKEN_ENV, TOKEN)
    monkeypatch.setattr(access, "_visitor", lambda st: ("203.0.113.9", "lab.example:8501"))  # the guesser
    guesser = open_page("runs")
    for attempt in range(8):
        guesser.text_input(key="access_token").input(f"guess-{attempt}").run()
    assert guesser.error[0].value.startswith("Too many wrong tokens")
    monkeypatch.setattr(access, "_visitor", lambda st: ("198.51.100.7", "lab.example:8501"))  # the holder
    holder = open_page("runs")
    holder.text_input(key="access_token").input(TOKEN).run()
    assert not holder.exception and "secret-run" in shown(holder)
    monkeypatch.setattr(access, "_visitor", lambda st: ("203.0.113.9", "lab.example:8501"))
    again = open_page("runs")  # the guesser's new session (a reload): its address still waits
    again.text_input(key="access_token").input(TOKEN).run()
    assert again.error[0].value.startswith("Too many wrong tokens") and "secret-run" not in shown(again)
