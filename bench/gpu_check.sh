#!/usr/bin/env bash
# The prepared GPU check: bench/gpu_check.py on a machine with CUDA, bounded to 8 minutes.
# The GPU image has torch and transformers but not every pin of requirements.txt: wheels that
# bench/gpu_wheels.sh downloaded into .whl/ (beside a checkout, on a machine with pip) are installed
# into /tmp/site first and come first on the path; bench/gpu_preflight.py prints the versions and stops
# within seconds where the decode's static cache cannot run. Without CUDA it refuses at once (exit 2).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "gpu_check: no CUDA device here (torch missing, or torch.cuda.is_available() is False); run it on a machine with a GPU" >&2
  exit 2
fi
# the wheels only where there is a GPU: a checkout with .whl/ on a CPU machine still refuses at once
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:$PYTHONPATH"  # first: the carried transformers replaces the image's own
fi
"$PY" bench/gpu_preflight.py
exec timeout 480 "$PY" bench/gpu_check.py "$@"
