#!/usr/bin/env bash
# Wheels the GPU image lacks (its own torch, transformers, pandas, pyarrow are used), for Python 3.12
# on x86-64, into .whl/ (git-ignored); bench/gpu_check.sh installs them there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
pins=$(grep -E '^(duckdb|datasets|math-verify|latex2sympy2_extended|antlr4-python3-runtime|streamlit|altair|gguf|dill|multiprocess|xxhash)==' requirements.txt || true)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any -d .whl $pins
ls .whl
