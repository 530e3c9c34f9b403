#!/usr/bin/env bash
# The prepared GPU comparison: bench/gpu_vs_trl.py on one CUDA device, this trainer and TRL 1.16 side by side,
# about 7 minutes of figures, about 8 in all: one device call (600 s at most) with room for a short second one
# (`--only PART`: one part rerun after the models are built again). The wheels bench/gpu_wheels.sh downloaded
# into .whl/ (the pinned transformers, tokenizers, regex, peft; TRL and what it needs) are installed into
# /tmp/site and put first on the path, ahead of the image's own; then bench/gpu_preflight.py prints the versions
# and stops the call within seconds, with one line, where the decode's static cache cannot run. Without CUDA it
# refuses at once (exit 2), unless given --smoke (toy sizes on the CPU, the same code paths).
#   device tool: run(command="bash bench/gpu_vs_trl.sh", carry=[".whl"], timeout_s=600)
#   a rerun:     run(command="bash bench/gpu_vs_trl.sh --only 'ours 0.5b'", carry=[".whl"], timeout_s=300)
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
  export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi
"$PY" bench/gpu_preflight.py
# the driver's deadline is 420 s (--budget); the 30 s past it are for a part's exit and the notes
exec timeout 450 "$PY" bench/gpu_vs_trl.py "$@"
