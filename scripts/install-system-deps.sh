#!/usr/bin/env bash
# Installs the Debian packages the tests use, once; a no-op when they are present.
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
chromium --version
