"""Hub id or local path, and whether the Hugging Face hub can be reached at all.

Offline, both loaders (models and datasets) read the local cache only, so an unknown id fails at
once instead of after a minute of retries.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse


def looks_local(source: str) -> bool:
    """A path (starts with . / ~, or exists) rather than a hub id such as org/name."""
    return source.startswith((".", "/", "~")) or Path(source).exists()


def hub_reachable() -> bool:
    """Whether the hub's host resolves (False when HF_HUB_OFFLINE is set)."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False
    host = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co").hostname or "huggingface.co"
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        return False
    return True
