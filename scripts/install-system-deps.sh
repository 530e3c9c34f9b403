#!/usr/bin/env bash
# Installs the Debian packages the tests use, once; a no-op when they are present:
# chromium (the browser tests) and bubblewrap (the code_tests reward's sandbox, `bwrap`).
set -euo pipefail
if ! command -v chromium >/dev/null 2>&1 || ! command -v bwrap >/dev/null 2>&1; then
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium bubblewrap >/dev/null
fi
chromium --version
bwrap --version
