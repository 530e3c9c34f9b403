"""Who may use this dashboard, and what the launch form may reach.

The dashboard launches processes and shows files, so it is for the person at this machine:
- A browser on another machine is let in only with a token (GRPO_LAB_DASHBOARD_TOKEN, or
  `dashboard_token` in Streamlit secrets); with no token set it is refused. Streamlit may have been
  started listening on every interface (`.streamlit/config.toml` is read only from the folder it
  starts in), so the check is on each visitor, not on the server's address.
- Local means a loopback peer *and* a Host header this server answers to (localhost, 127.0.0.1,
  [::1], the configured server.address, or GRPO_LAB_ALLOWED_HOSTS). A page from another site whose
  name was re-pointed at 127.0.0.1 (DNS rebinding) has a loopback peer but its own Host: it gets the
  token prompt. Wrong tokens are rate-limited, per session and per process.
- Paths typed into the launch form (task, model, held-out file), and those inside reward_params
  (REWARD_PATH_PARAMS: from a config file or a resumed run's config.json), must lie inside the data
  folders: the project, the runs folder, and those listed in GRPO_LAB_DATA_DIRS (separated by ':').
- A reward named as `module:function` must come from a module listed in GRPO_LAB_REWARD_MODULES
  (comma-separated prefixes); registered rewards are always allowed.
- The launch form and the Groups page's rescore form go through the same check (check_launch) over
  every reward parameter; an interpreter named there never comes from the runs folder, and the
  sandbox's own switches (allow_unsandboxed, user) are the operator's, not a form's. In the
  dashboard's process the sandbox asks check_program before it starts any interpreter a reward names.
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

TOKEN_ENV, DATA_DIRS_ENV, REWARD_MODULES_ENV = ("GRPO_LAB_DASHBOARD_TOKEN", "GRPO_LAB_DATA_DIRS",
                                                 "GRPO_LAB_REWARD_MODULES")
ALLOWED_HOSTS_ENV = "GRPO_LAB_ALLOWED_HOSTS"
PATH_OPTIONS = ("task", "model", "eval_split")
# the registered rewards' parameters that name a file or folder (grpo_lab/rewards/registry.py): a ratings
# file, a reward model (a folder, or a hub id), the interpreter code_tests runs completions with
REWARD_PATH_PARAMS = {"human_feedback": ("path",), "reward_model": ("model",), "code_tests": ("python",)}
ALWAYS_PATHS = ("path", "python")  # never a hub id: checked even without a leading / . ~
# a program the dashboard's own process starts (the sandbox asks the interpreter for its library
# folders): never from the runs folder, which pages and planted files write into
PROGRAM_PARAMS = ("python",)
# code_tests' switches that weaken the sandbox: the operator's choice (GRPO_LAB_ALLOW_UNSANDBOXED where
# the dashboard starts), never a form's, which could then run a planted completion as this user
UNSAFE_SANDBOX = {"allow_unsandboxed": (False,), "user": ("nobody",)}
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


def is_local_visit(ip: Any, host: Any, address: Any = None) -> bool:
    """A visitor on this machine who asked for this server by one of its own names.

    Streamlit gives no ip_address (None) both for a loopback peer and when there is no request at
    all (AppTest, a bare script run); a real request always has a Host header (HTTP/1.1 and
    WebSockets require one), so None with no Host is a script run, and None with a Host is a
    loopback peer whose Host must be one of ours, as must a loopback ip given as text.
    """
    if not isinstance(ip, str):
        return host is None or host_name(host) in allowed_hosts(address)
    return is_local(ip) and host_name(host) in allowed_hosts(address)


def wait_after(failures: int, free: int = FREE_TRIES) -> float:
    """Seconds to wait after `failures` wrong tokens: none for the first `free`, then doubling."""
    return 0.0 if failures < free else float(min(2 ** (failures - free), MAX_WAIT_S))


class Attempts:
    """Wrong-token count and the time the next try is allowed, shared by every session of this
    process (a reload starts a new session, so a per-session count alone is no limit)."""

    def __init__(self, free: int = PROCESS_FREE_TRIES):
        self.free, self.failures, self.next_at = free, 0, 0.0
        self._lock = threading.Lock()

    def wait_left(self, now: float) -> float:
        with self._lock:
            return max(0.0, self.next_at - now)

    def failed(self, now: float) -> None:
        with self._lock:
            self.failures += 1
            self.next_at = now + wait_after(self.failures, self.free)

    def reset(self) -> None:
        with self._lock:
            self.failures, self.next_at = 0, 0.0


PROCESS_ATTEMPTS = Attempts()
_now = time.time  # the gate's clock (tests stand in their own)


def token_ok(supplied: str, expected: str) -> bool:
    return bool(expected) and hmac.compare_digest(supplied.encode(), expected.encode())


def data_dirs(runs_dir: Path) -> list[Path]:
    extra = [Path(p).expanduser() for p in os.environ.get(DATA_DIRS_ENV, "").split(os.pathsep) if p.strip()]
    return [p.resolve() for p in (project_dir(), runs_dir, *extra)]


def check_launch(values: dict[str, Any], runs_dir: Path) -> str | None:
    """One line saying which form value reaches outside what the dashboard may use; None when fine."""
    from grpo_lab.trainer.data import is_data_file
    from grpo_lab.trainer.hub import looks_local

    allowed = data_dirs(runs_dir)
    paths = [(option, values.get(option), False) for option in PATH_OPTIONS]
    params = values.get("reward_params")
    for reward, names in REWARD_PATH_PARAMS.items():  # paths inside reward_params (a config file, a resumed run)
        given = params.get(reward) if isinstance(params, dict) else None
        paths += [(f"reward_params.{reward}.{n}", given.get(n), n in ALWAYS_PATHS) for n in names
                  if isinstance(given, dict)]
    for option, value, always in paths:
        if option.rpartition(".")[2] in PROGRAM_PARAMS and value is not None and not isinstance(value, str):
            return f"{option}: {value!r} is not a path to an interpreter"
        if not isinstance(value, str) or not value or not (always or looks_local(value) or is_data_file(value)):
            continue  # a built-in name or a hub id
        path = Path(value).expanduser()
        resolved = (path if path.is_absolute() else project_dir() / path).resolve()
        if not any(resolved.is_relative_to(folder) for folder in allowed):
            return (f"{option}: {value} is outside the folders the dashboard may read ({', '.join(map(str, allowed))}); "
                    f"add its folder to {DATA_DIRS_ENV}")
        if option.rpartition(".")[2] in PROGRAM_PARAMS and resolved.is_relative_to(Path(runs_dir).resolve()):
            return (f"{option}: {value} is inside the runs folder; an interpreter the dashboard starts must come "
                    f"from the project or {DATA_DIRS_ENV}")
    code_tests = params.get("code_tests") if isinstance(params, dict) else None
    for name, safe in UNSAFE_SANDBOX.items():
        if isinstance(code_tests, dict) and name in code_tests and code_tests[name] not in safe:
            return (f"reward_params.code_tests.{name}: {code_tests[name]!r} weakens the sandbox, which only the "
                    f"dashboard's operator may do (start it with GRPO_LAB_ALLOW_UNSANDBOXED=1); allowed here: "
                    f"{', '.join(map(repr, safe))}")
    prefixes = [p.strip() for p in os.environ.get(REWARD_MODULES_ENV, "").split(",") if p.strip()]
    rewards = values.get("rewards")
    names = rewards.keys() if isinstance(rewards, dict) else [
        item.split("=")[0].strip() for item in str(rewards or "").split(",")]
    for name in names:
        module = name.partition(":")[0]
        if ":" in name and not any(module == p or module.startswith(p + ".") for p in prefixes):
            return (f"rewards: {name!r} imports module {module!r}, which the dashboard does not run; list it in "
                    f"{REWARD_MODULES_ENV} (registered rewards need nothing)")
    # tools and environments are user code too (module:function, module:Class): the same allow-list
    for option in ("tools", "environment"):
        for spec in (s.strip() for s in str(values.get(option) or "").split(",")):
            module = spec.partition(":")[0]
            if ":" in spec and not any(module == p or module.startswith(p + ".") for p in prefixes):
                return (f"{option}: {spec!r} imports module {module!r}, which the dashboard does not run; list it in "
                        f"{REWARD_MODULES_ENV} (built-in tools need nothing)")
    return None


def check_program(python: str, runs_dir: Path) -> str | None:
    """The launch check for an interpreter a reward names: what the sandbox asks before it starts one
    in the dashboard's process (rewards.sandbox.set_program_check)."""
    return check_launch({"reward_params": {"code_tests": {"python": python}}}, runs_dir)


def _expected_token(st) -> str:
    try:
        return os.environ.get(TOKEN_ENV) or str(st.secrets.get("dashboard_token", ""))
    except Exception:  # noqa: BLE001 - no secrets file: Streamlit raises; no token then
        return os.environ.get(TOKEN_ENV, "")


def _visitor(st) -> tuple[Any, Any]:
    """(peer ip, Host header) of this session; a separate function so tests can stand in a visitor."""
    try:
        host = st.context.headers.get("Host")
    except Exception:  # noqa: BLE001 - no request behind this session (AppTest, a bare script run)
        host = None
    return st.context.ip_address, host


def _try_token(expected: str) -> None:
    """The token field's callback: check, count, and empty the field either way, so the token
    never stays in the page (a callback may set a widget's value; the script body may not)."""
    import streamlit as st

    state = st.session_state
    supplied, state["access_token"] = str(state.get("access_token") or ""), ""
    if not supplied:
        return
    now = _now()
    wait = max(PROCESS_ATTEMPTS.wait_left(now), float(state.get("access_next_at", 0.0)) - now)
    if wait > 0:
        state["access_message"] = f"Too many wrong tokens: wait {wait:.0f} s, then try again."
    elif token_ok(supplied, expected):
        state["access_granted"] = True
        PROCESS_ATTEMPTS.reset()
    else:
        failures = int(state.get("access_failures", 0)) + 1
        state["access_failures"], state["access_next_at"] = failures, now + wait_after(failures)
        PROCESS_ATTEMPTS.failed(now)
        state["access_message"] = "Wrong token."


def gate() -> None:
    """Stop the page for a visitor who is not local (see the module doc) and has not given the token."""
    import streamlit as st

    ip, host = _visitor(st)
    if st.session_state.get("access_granted") or is_local_visit(ip, host, st.get_option("server.address")):
        return
    expected = _expected_token(st)
    if not expected:
        why = ("This dashboard only serves this machine." if not is_local(ip) else
               f"This page was opened as {host_name(host) or '?'}, a name this server does not answer to as "
               f"itself; open it as localhost, or list the name in {ALLOWED_HOSTS_ENV}.")
        st.error(f"{why} To open it from elsewhere, set {TOKEN_ENV} (or dashboard_token in Streamlit secrets) "
                 "and enter it here.")
        st.stop()
    st.text_input("Access token", type="password", key="access_token", on_change=_try_token, args=(expected,))
    if message := st.session_state.pop("access_message", None):
        st.error(message)
    st.stop()
