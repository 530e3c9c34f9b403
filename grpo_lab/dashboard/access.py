"""Who may use this dashboard.

The dashboard launches processes and shows files, so it is for the person at this machine:
- A browser on another machine is let in only with a token (GRPO_LAB_DASHBOARD_TOKEN, or
  `dashboard_token` in Streamlit secrets); with no token set it is refused. Streamlit may have been
  started listening on every interface (`.streamlit/config.toml` is read only from the folder it
  starts in), so the check is on each visitor, not on the server's address.
- Local means a loopback peer *and* a Host header this server answers to (localhost, 127.0.0.1,
  [::1], the configured server.address, or GRPO_LAB_ALLOWED_HOSTS). A page from another site whose
  name was re-pointed at 127.0.0.1 (DNS rebinding) has a loopback peer but its own Host: it gets the
  token prompt. A session with no peer address (Streamlit's agent API, `--server.enableAgentApi`) is
  not local either: it gets the token prompt, as a browser from elsewhere does. Wrong tokens are
  rate-limited per session and per peer address (Attempts): the wait slows the guesser, not the holder.
- What the launch and rescore forms may reach is grpo_lab/launching/allowed.py's check_launch.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import re
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from grpo_lab import project_dir

TOKEN_ENV = "GRPO_LAB_DASHBOARD_TOKEN"
ALLOWED_HOSTS_ENV = "GRPO_LAB_ALLOWED_HOSTS"
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
HOST_NAME = re.compile(r"[a-z0-9._-]+|[0-9a-f:.]+")  # a DNS name or an IP address, nothing else
FREE_TRIES, PROCESS_FREE_TRIES, MAX_WAIT_S = 5, 20, 300  # wrong tokens before waits start; longest wait


def is_local(ip) -> bool:
    """A visitor on this machine. Not a string: there is no network peer at all (a script run
    without a server, as Streamlit's AppTest does, gives None or a stand-in object)."""
    if not isinstance(ip, str):
        return True
    try:
        return ipaddress.ip_address(ip.split("%")[0]).is_loopback
    except ValueError:
        return False


def allowed_hosts(address: Any = None) -> set[str]:
    """Host names this server answers to as itself: the loopback names, the configured
    server.address (`address`), and GRPO_LAB_ALLOWED_HOSTS (comma-separated)."""
    extra = [h for h in os.environ.get(ALLOWED_HOSTS_ENV, "").split(",")]
    names = {*LOCAL_HOSTS, *(extra + ([address] if isinstance(address, str) else []))}
    return {n.strip().lower().strip("[]").rstrip(".") for n in names if n and n.strip()}


def host_name(header: Any) -> str | None:
    """The name in a Host header ('localhost:8501' -> 'localhost', '[::1]:80' -> '::1'); None when
    it is missing or not a plain host[:port]."""
    if not isinstance(header, str) or not header:
        return None
    try:
        parsed = urlparse(f"//{header}")
        _ = parsed.port  # raises on a port that is not a number in range
    except ValueError:
        return None
    if parsed.hostname is None or parsed.username is not None or parsed.path or parsed.query or parsed.fragment:
        return None
    name = parsed.hostname.lower().rstrip(".")
    return name if HOST_NAME.fullmatch(name) else None  # shown on the page: never markup


SCRIPT_RUN = object()  # _visitor's peer when no server runs the script at all (AppTest, a bare script run)


def peer(client_context: Any) -> str | None:
    """The TCP peer of a session as the server saw it (a loopback one included), from Streamlit's client
    context; None when the session has no connection. st.context.ip_address reads None both for a
    loopback browser and for a session of Streamlit's agent API (`--server.enableAgentApi`: a script run
    for an HTTP request, whose context reports no remote_ip), so it cannot tell a local visitor from an
    agent calling from anywhere; the raw peer can."""
    remote = getattr(client_context, "remote_ip", None)
    if isinstance(remote, str) and remote:
        return remote
    # a stand-in, not an address (AppTest mocks the runtime): no server, as SCRIPT_RUN
    return None if remote is None or isinstance(remote, str) else SCRIPT_RUN


def is_local_visit(ip: Any, host: Any, address: Any = None) -> bool:
    """A visitor on this machine who asked for this server by one of its own names: a loopback peer
    address (peer()) and a Host header this server answers to. No peer address is not local (an agent
    API session has none); only a run with no server at all (SCRIPT_RUN, or AppTest's stand-in object:
    no Host either) is.
    """
    if ip is None:
        return False
    if not isinstance(ip, str):
        return host is None
    return is_local(ip) and host_name(host) in allowed_hosts(address)


def wait_after(failures: int, free: int = FREE_TRIES) -> float:
    """Seconds to wait after `failures` wrong tokens: none for the first `free`, then doubling."""
    return 0.0 if failures < free else float(min(2 ** (failures - free), MAX_WAIT_S))


class Attempts:
    """Wrong-token counts and waits per peer address, shared by every session of this process (a reload
    starts a new session, so a per-session count alone is no limit). A wait slows the guesser, not the
    holder: it is kept for the address the wrong tokens came from, so a holder at another address is
    let in at once; server-wide, once more than `server_free` wrong tokens came in (from any address),
    every address gets one free try instead of `free`. A session's own count (gate) comes on top. Known
    limit: a guesser and the holder behind one address (the same proxy) share its wait."""

    MAX_ADDRESSES = 10_000  # addresses remembered; the oldest go first (a bound on memory, not a limit)

    def __init__(self, free: int = FREE_TRIES, server_free: int = PROCESS_FREE_TRIES):
        self.free, self.server_free, self.failures = free, server_free, 0
        self.by_address: dict[str, tuple[int, float]] = {}  # address -> (wrong tokens, next try allowed at)
        self._lock = threading.Lock()

    def wait_left(self, address: Any, now: float) -> float:
        with self._lock:
            return max(0.0, self.by_address.get(str(address), (0, 0.0))[1] - now)

    def failed(self, address: Any, now: float) -> None:
        with self._lock:
            self.failures += 1
            count = self.by_address.pop(str(address), (0, 0.0))[0] + 1
            free = self.free if self.failures <= self.server_free else 1
            self.by_address[str(address)] = (count, now + wait_after(count, free))
            while len(self.by_address) > self.MAX_ADDRESSES:
                self.by_address.pop(next(iter(self.by_address)))

    def reset(self, address: Any) -> None:
        with self._lock:
            self.by_address.pop(str(address), None)


PROCESS_ATTEMPTS = Attempts()
_now = time.time  # the gate's clock (tests stand in their own)


def token_ok(supplied: str, expected: str) -> bool:
    return bool(expected) and hmac.compare_digest(supplied.encode(), expected.encode())


def _expected_token(st) -> str:
    try:
        return os.environ.get(TOKEN_ENV) or str(st.secrets.get("dashboard_token", ""))
    except Exception:  # noqa: BLE001 - no secrets file: Streamlit raises; no token then
        return os.environ.get(TOKEN_ENV, "")


def _visitor(st) -> tuple[Any, Any]:
    """(peer address, Host header) of this session: peer() of its client, SCRIPT_RUN when no server runs
    the script; a separate function so tests can stand in a visitor."""
    from streamlit import runtime
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    try:
        host = st.context.headers.get("Host")
    except Exception:  # noqa: BLE001 - no request behind this session (AppTest, a bare script run)
        host = None
    ctx = get_script_run_ctx(suppress_warning=True)
    client = runtime.get_instance().get_client(ctx.session_id) if runtime.exists() and ctx is not None else None
    if client is None:  # no server, or a session no client connected to (AppTest's)
        return SCRIPT_RUN, host
    return peer(client.client_context), host  # a browser's socket, or an agent API request (no peer)


def _try_token(expected: str, address: Any = None) -> None:
    """The token field's callback: check, count, and empty the field either way, so the token
    never stays in the page (a callback may set a widget's value; the script body may not)."""
    import streamlit as st

    state = st.session_state
    supplied, state["access_token"] = str(state.get("access_token") or ""), ""
    if not supplied:
        return
    now = _now()
    wait = max(PROCESS_ATTEMPTS.wait_left(address, now), float(state.get("access_next_at", 0.0)) - now)
    if wait > 0:
        state["access_message"] = f"Too many wrong tokens: wait {wait:.0f} s, then try again."
    elif token_ok(supplied, expected):
        state["access_granted"] = True
        PROCESS_ATTEMPTS.reset(address)
    else:
        failures = int(state.get("access_failures", 0)) + 1
        state["access_failures"], state["access_next_at"] = failures, now + wait_after(failures)
        PROCESS_ATTEMPTS.failed(address, now)
        state["access_message"] = "Wrong token."


def gate() -> None:
    """Stop the page for a visitor who is not local (see the module doc) and has not given the token."""
    import streamlit as st

    ip, host = _visitor(st)
    if st.session_state.get("access_granted") or is_local_visit(ip, host, st.get_option("server.address")):
        return
    expected = _expected_token(st)
    if not expected:
        why = ("This dashboard only serves this machine." if ip is None or not is_local(ip) else
               f"This page was opened as {host_name(host) or '?'}, a name this server does not answer to as "
               f"itself; open it as localhost, or list the name in {ALLOWED_HOSTS_ENV}.")
        st.error(f"{why} To open it from elsewhere, set {TOKEN_ENV} (or dashboard_token in Streamlit secrets) "
                 "and enter it here.")
        st.stop()
    st.text_input("Access token", type="password", key="access_token", on_change=_try_token,
                  args=(expected, ip if isinstance(ip, str) else "no address"))
    if message := st.session_state.pop("access_message", None):
        st.error(message)
    st.stop()
