#!/usr/bin/env bash
# The wheels a GPU call carries (Python 3.12, x86-64), into .whl/ (git-ignored); bench/gpu_vs_trl.sh and
# bench/gpu_check.sh install them into /tmp/site there, ahead of the image's own packages on the path.
# - transformers, tokenizers, regex, peft: pinned in requirements.txt. The image has each in a version of its
#   own (transformers 5.17 when last read; the decode's static cache needs 5.4 or later), and they travel
#   together: transformers 5.23 refuses tokenizers outside 0.23.x and needs regex 2025.10.22 or later.
# - trl (requirements-trl.txt) and what it needs that the image lacks: datasets (requirements.txt), dill and
#   multiprocess (named here: neither file pins them; the versions datasets 5.2.0 takes, as in the venv).
# - math-verify, latex2sympy2_extended, antlr4-python3-runtime: the demo's correctness reward, which
#   bench/gpu_check.py trains with (without them the trainer stops at its config check).
# Left out: what neither script imports (streamlit, altair, duckdb, gguf; gpu_check's dashboard pages
# are skipped without streamlit, and gpu_vs_trl's smoke runs every part without any of them), and what the
# image has (torch, numpy, pandas, pyarrow, safetensors, accelerate, huggingface_hub, fsspec, xxhash,
# pyyaml, tqdm, psutil, sympy, typer).
# A call carries at most 64 MiB, the repository included: the total is printed, and over 56 MiB this fails.
set -euo pipefail
cd "$(dirname "$0")/.."
names="transformers tokenizers regex peft datasets trl math-verify latex2sympy2_extended antlr4-python3-runtime"
pins=""
for name in $names; do
  pin=$(grep -hE "^$name==" requirements.txt requirements-trl.txt || true)
  [ -n "$pin" ] || { echo "gpu_wheels: no pin for $name in requirements.txt or requirements-trl.txt" >&2; exit 1; }
  pins="$pins $pin"
done
pins="$pins dill==0.4.1 multiprocess==0.70.19"
rm -rf .whl
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any -d .whl $pins
ls -l .whl | awk 'NR > 1 {printf "%8.2f MB  %s\n", $5 / 1e6, $9}'
wheels=$(cat .whl/*.whl | wc -c)
repo=$(git ls-files -co --exclude-standard -z | xargs -0 cat 2>/dev/null | wc -c)
awk -v w="$wheels" -v r="$repo" 'BEGIN {
  m = 1048576; t = (w + r) / m
  printf "carried: wheels %.1f MiB + repository %.1f MiB = %.1f MiB of the 64 MiB a call may carry\n", w / m, r / m, t
  if (t > 56) { print "gpu_wheels: over 56 MiB: too little room left under the 64 MiB limit" > "/dev/stderr"; exit 1 }
}'
