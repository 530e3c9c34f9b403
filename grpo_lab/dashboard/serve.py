"""`grpo-lab-dashboard [STREAMLIT OPTIONS]`: the dashboard from any folder, on localhost.

Streamlit reads `.streamlit/config.toml` only from the current folder, so the settings that matter
are given on its command line here; options the user adds come later and win (for example
`--server.address 0.0.0.0`, which then needs GRPO_LAB_DASHBOARD_TOKEN: see grpo_lab/dashboard/access.py).
Runs are read from $GRPO_LAB_RUNS_DIR, else ./runs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

APP = Path(__file__).with_name("app.py")
SETTINGS = ("--server.address", "localhost", "--server.headless", "true", "--browser.gatherUsageStats", "false")


def command(argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "streamlit", "run", str(APP), *SETTINGS, *argv]


def main(argv: list[str] | None = None) -> int:
    cmd = command(sys.argv[1:] if argv is None else argv)
    os.execv(cmd[0], cmd)  # becomes the server: Ctrl-C and signals reach Streamlit itself
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
