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
import sys
from pathlib import Path

from grpo_lab.launching.identity import option  # `--flag V` or `--flag=V`, the last one wins

APP = Path(__file__).with_name("app.py")
SETTINGS = ("--server.address", "localhost", "--server.headless", "true", "--browser.gatherUsageStats", "false")


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
    cmd = command(sys.argv[1:] if argv is None else argv)
    scheduler.start(runs_dir)  # its parent is this pid, which execv hands on to the server
    os.execv(cmd[0], cmd)  # becomes the server: Ctrl-C and signals reach Streamlit itself
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
