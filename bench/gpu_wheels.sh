#!/usr/bin/env bash
# Wheels the GPU image lacks (its own torch, transformers, pandas, pyarrow are used), for Python 3.12
# on x86-64, into .whl/ (git-ignored); bench/gpu_check.sh and bench/gpu_vs_trl.sh install them there.
# Pins from requirements.txt and requirements-trl.txt; TRL's datasets also needs dill and multiprocess,
# which neither file pins, so they are named here (the versions datasets 5.2.0 takes, as in the venv).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
pins=$(grep -hE '^(duckdb|datasets|math-verify|latex2sympy2_extended|antlr4-python3-runtime|streamlit|altair|gguf|dill|multiprocess|xxhash|trl)==' \
  requirements.txt requirements-trl.txt || true)
pins="$pins dill==0.4.1 multiprocess==0.70.19"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any -d .whl $pins
ls .whl
