"""`grpo-lab-dashboard [STREAMLIT OPTIONS]`: the dashboard from any folder, on localhost.

Streamlit reads `.streamlit/config.toml` only from the current folder, so the settings that matter
are given on its command line here; options the user adds come later and win (for example
`--server.address 0.0.0.0`, which then needs GRPO_LAB_DASHBOARD_TOKEN: see grpo_lab/dashboard/access.py).
Runs are read from $GRPO_LAB_RUNS_DIR, else ./runs.

Listening on loopback only, every visitor is on this machine, so a Host header that is not one of
this server's names can only come from DNS rebinding (a web page whose name now resolves to
127.0.0.1): then Streamlit's own `server.allowedHosts` refuses the WebSocket itself, before any
script runs. Listening wider, visitors from other machines use names we cannot know, so the
page gate (access.gate) answers a foreign Host with the token prompt instead.

Beside the server runs the queue's scheduler (launching/scheduler.py), so queued runs start when a
slot frees with no page open; it ends with the server.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from pathlib import Path

from grpo_lab.launching.identity import option  # `--flag V` or `--flag=V`, the last one wins

APP = Path(__file__).with_name("app.py")
SETTINGS = ("--server.address", "localhost", "--server.headless", "true", "--browser.gatherUsageStats", "false")
DEFAULT_PORT = 8501  # Streamlit's


def _loopback(address: str) -> bool:
    if address.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def host_settings(argv: list[str]) -> list[str]:
    """`--server.allowedHosts` for each of access.allowed_hosts, when the server listens on
    loopback only and the user named no allowed hosts of their own."""
    from grpo_lab.dashboard.access import allowed_hosts

    address = option([*SETTINGS, *argv], "--server.address") or ""
    if not _loopback(address) or option(argv, "--server.allowedHosts") is not None:
        return []
    return [arg for host in sorted(allowed_hosts(address)) for arg in ("--server.allowedHosts", host)]


def port_taken(port: int, address: str = "localhost") -> bool:
    """Whether something already listens on `port` (another dashboard, most often)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1" if _loopback(address) else address, port)) == 0


def port_note(argv: list[str]) -> tuple[str, bool] | None:
    """(what to say on the console, whether to stop) when the port is taken, else None. A port the
    user named is theirs to change; Streamlit's default moves on to the next free one by itself,
    silently, so the console says which was taken."""
    named = option(argv, "--server.port")
    address = option([*SETTINGS, *argv], "--server.address") or "localhost"
    port = int(named) if named and named.isdigit() else DEFAULT_PORT
    if not port_taken(port, address):
        return None
    if named:
        return f"error: port {port} is taken (another dashboard?): pick another, e.g. make dashboard PORT={port + 1}", True
    return (f"note: port {port} is taken (another dashboard?): this one takes the next free port, named in "
            f"Streamlit's lines below; to choose one: make dashboard PORT=8502", False)


def command(argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "streamlit", "run", str(APP), *SETTINGS, *host_settings(argv), *argv]


def main(argv: list[str] | None = None) -> int:
    from grpo_lab.launching import scheduler
    from grpo_lab.launching.keys import KeyDirError, check_key_dir
    from grpo_lab.rundir.layout import default_runs_dir

    runs_dir = Path(default_runs_dir())
    try:  # a key others may read would let them sign queue entries: refused before the server starts
        check_key_dir(runs_dir)
    except KeyDirError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    argv = sys.argv[1:] if argv is None else argv
    note = port_note(argv)
    if note is not None:
        print(note[0], file=sys.stderr)
        if note[1]:
            return 2
    cmd = command(argv)
    scheduler.start(runs_dir)  # its parent is this pid, which execv hands on to the server
    os.execv(cmd[0], cmd)  # becomes the server: Ctrl-C and signals reach Streamlit itself
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
