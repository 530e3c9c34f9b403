"""What a GPU call checks first, in seconds: the versions it will run with (the carried wheels in /tmp/site come
first on the path, the image's own packages after), then whether transformers' static cache holds the decode
loop (grpo_lab/trainer/decode.py, StaticDecoder.missing). Run by bench/gpu_vs_trl.sh and bench/gpu_check.sh;
prints one line a package, and where the decode cannot run as measured, one line on stderr and exit 3.

    python3 bench/gpu_preflight.py
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from pathlib import Path

# what the GPU scripts import, carried (.whl) or the image's
PACKAGES = ("torch", "transformers", "tokenizers", "regex", "peft", "trl", "datasets", "dill", "multiprocess",
            "huggingface_hub", "safetensors", "accelerate", "numpy", "pandas", "pyarrow", "fsspec", "xxhash")


def versions() -> dict[str, str]:
    """Each package's version as the path finds it first, or why it is missing."""
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except Exception as exc:  # noqa: BLE001 - a missing package is a line here, not a failure
            found[name] = f"missing ({type(exc).__name__})"
    return found


def main() -> int:
    for name, version in versions().items():
        print(f"{name} {version}", flush=True)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    try:
        from grpo_lab.trainer.decode import StaticDecoder

        why = StaticDecoder.missing()
    except Exception as exc:  # noqa: BLE001 - one line, not a traceback
        why = f"importing the decode failed: {type(exc).__name__}: {exc}"
    if why:
        print(f"gpu_preflight: stopped: {why}; the static and graph decode loops cannot run as they would be measured "
              "(bash bench/gpu_wheels.sh downloads the pinned transformers to carry)", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
