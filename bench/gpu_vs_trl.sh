#!/usr/bin/env bash
# The prepared GPU comparison: bench/gpu_vs_trl.py on one CUDA device, this trainer and TRL 1.16
# side by side, bounded to 9 minutes. The GPU image has torch and transformers but not TRL and what it needs
# (trl, datasets, dill, multiprocess): bench/gpu_wheels.sh downloads them into .whl/ (beside a checkout, on a
# machine with pip), and they are installed into /tmp/site here first. Without CUDA it refuses at once
# (exit 2), unless given --smoke (toy sizes on the CPU, the same code paths).
#   device tool: run(command="bash bench/gpu_vs_trl.sh", carry=[".whl"], timeout_s=600)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
smoke=0
for arg in "$@"; do [ "$arg" = "--smoke" ] && smoke=1; done
if [ "$smoke" = 0 ] && ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "gpu_vs_trl: no CUDA device here (torch missing, or torch.cuda.is_available() is False); run it on a machine with a GPU, or pass --smoke" >&2
  exit 2
fi
if [ "$smoke" = 0 ] && compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
# the versions first: a missing wheel shows here before the minutes are spent
"$PY" - <<'PYEOF' || true
import importlib
for name in ("torch", "transformers", "trl", "datasets", "dill", "multiprocess", "xxhash", "fsspec", "accelerate"):
    try:
        print(f"{name} {importlib.import_module(name).__version__}")
    except Exception as exc:
        print(f"{name} missing ({type(exc).__name__})")
PYEOF
exec timeout 570 "$PY" bench/gpu_vs_trl.py "$@"
