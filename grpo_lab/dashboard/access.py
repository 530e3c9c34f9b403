"""Who may use this dashboard, and what the launch form may reach.

The dashboard launches processes and shows files, so it is for the person at this machine:
- A browser on another machine is let in only with a token (GRPO_LAB_DASHBOARD_TOKEN, or
  `dashboard_token` in Streamlit secrets); with no token set it is refused. Streamlit may have been
  started listening on every interface (`.streamlit/config.toml` is read only from the folder it
  starts in), so the check is on each visitor, not on the server's address.
- Paths typed into the launch form (task, model, held-out file) must lie inside the data folders:
  the project, the runs folder, and those listed in GRPO_LAB_DATA_DIRS (separated by ':').
- A reward named as `module:function` must come from a module listed in GRPO_LAB_REWARD_MODULES
  (comma-separated prefixes); registered rewards are always allowed.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from pathlib import Path
from typing import Any

from grpo_lab import project_dir

TOKEN_ENV, DATA_DIRS_ENV, REWARD_MODULES_ENV = ("GRPO_LAB_DASHBOARD_TOKEN", "GRPO_LAB_DATA_DIRS",
                                                 "GRPO_LAB_REWARD_MODULES")
PATH_OPTIONS = ("task", "model", "eval_split")


def is_local(ip) -> bool:
    """A visitor on this machine. Not a string: there is no network peer at all (a script run
    without a server, as Streamlit's AppTest does, gives None or a stand-in object)."""
    if not isinstance(ip, str):
        return True
    try:
        return ipaddress.ip_address(ip.split("%")[0]).is_loopback
    except ValueError:
        return False


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
    for option in PATH_OPTIONS:
        value = values.get(option)
        if not isinstance(value, str) or not value or not (looks_local(value) or is_data_file(value)):
            continue  # a built-in name or a hub id
        path = Path(value).expanduser()
        resolved = (path if path.is_absolute() else project_dir() / path).resolve()
        if not any(resolved.is_relative_to(folder) for folder in allowed):
            return (f"{option}: {value} is outside the folders the dashboard may read ({', '.join(map(str, allowed))}); "
                    f"add its folder to {DATA_DIRS_ENV}")
    prefixes = [p.strip() for p in os.environ.get(REWARD_MODULES_ENV, "").split(",") if p.strip()]
    rewards = values.get("rewards")
    names = rewards.keys() if isinstance(rewards, dict) else [
        item.split("=")[0].strip() for item in str(rewards or "").split(",")]
    for name in names:
        module = name.partition(":")[0]
        if ":" in name and not any(module == p or module.startswith(p + ".") for p in prefixes):
            return (f"rewards: {name!r} imports module {module!r}, which the dashboard does not run; list it in "
                    f"{REWARD_MODULES_ENV} (registered rewards need nothing)")
    return None


def gate() -> None:
    """Stop the page for a visitor from another machine without the token (see the module doc)."""
    import streamlit as st

    if is_local(st.context.ip_address) or st.session_state.get("access_granted"):
        return
    try:
        expected = os.environ.get(TOKEN_ENV) or str(st.secrets.get("dashboard_token", ""))
    except Exception:  # noqa: BLE001 - no secrets file: Streamlit raises; no token then
        expected = os.environ.get(TOKEN_ENV, "")
    if not expected:
        st.error(f"This dashboard only serves this machine. To open it from elsewhere, set {TOKEN_ENV} "
                 "(or dashboard_token in Streamlit secrets) and enter it here.")
        st.stop()
    supplied = st.text_input("Access token", type="password", key="access_token")
    if not token_ok(supplied, expected):
        if supplied:
            st.error("Wrong token.")
        st.stop()
    st.session_state["access_granted"] = True
