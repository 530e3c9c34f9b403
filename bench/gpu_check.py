"""The prepared GPU check: the trainer on one CUDA device, one process and through torchrun.

    bash bench/gpu_check.sh            # sets up what the GPU image lacks, then runs this file

Runs, each bounded in time (the whole check is sized for under 8 minutes on one H200):
1. the built-in demo (tiny model, arithmetic), one process;
   then the demo resumed from its checkpoint for 4 more steps (RNG state, CUDA's too, read as data only);
2. a Llama with SmolLM2-135M's shape (30 layers, 576 hidden, 9 heads, 3 key-value heads) and random
   weights, made here from a config (no download), in bfloat16, one process;
3. the same model through torchrun on one process (the launcher's path: env, process group, DDP);
4. the dashboard's Live and Groups pages over run 2's folder (Streamlit's AppTest), when Streamlit
   is installed.
It prints, per run, s/step, completion tokens/s, peak GPU memory and model FLOPs utilisation, read
back from each run's tables/scalars (`perf/mfu`, `perf/gpu_memory_gb`), medians over the steps after
the first (which pays for CUDA's start-up). Without CUDA it refuses at once with exit 2.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SMOLLM2_SHAPE = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                     num_key_value_heads=3, max_position_embeddings=2048, rope_theta=100000.0,
                     tie_word_embeddings=True, rms_norm_eps=1e-5)
VOCAB = 49152  # SmolLM2's; the character tokenizer is padded with placeholder tokens up to it


def build_smollm2_shaped(folder: Path) -> Path:
    """A random-weight Llama of SmolLM2-135M's shape and vocabulary size, saved as a model folder."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from grpo_lab.trainer.tiny import build_tokenizer

    if (folder / "config.json").exists():
        return folder
    tokenizer = build_tokenizer()
    tokenizer.add_tokens([f"<unused_{i}>" for i in range(VOCAB - len(tokenizer))])
    config = LlamaConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, **SMOLLM2_SHAPE)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def train(runs: Path, name: str, args: list[str], torchrun: bool, timeout: float) -> tuple[float, str]:
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1"] if torchrun else []
    command = [sys.executable, *launcher, "-m", "grpo_lab.trainer", "--runs-dir", str(runs), "--name", name, *args]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, f"timed out after {timeout:.0f} s"
    tail = (done.stderr or "").strip().splitlines()[-1:] or [""]
    return time.perf_counter() - start, "ok" if done.returncode == 0 else f"exit {done.returncode}: {tail[0]}"


def figures(run_dir: Path) -> dict[str, float]:
    from grpo_lab.rundir.reader import TableReader

    read = TableReader(run_dir, "scalars").read()
    if read.table is None:
        return {}
    df = read.table.to_pandas()
    later = df[df["step"] > df["step"].min()] if len(df) > 1 else df

    def median(column: str) -> float:
        return float(statistics.median(later[column].dropna())) if column in later and later[column].notna().any() else float("nan")

    return {"steps": float(len(df)), "s/step": median("time/step_s"), "tokens/s": median("perf/tokens_per_s"),
            "gen tokens/s": median("perf/generation_tokens_per_s"), "mfu": median("perf/mfu"),
            "GPU GB": median("perf/gpu_memory_gb")}


def sample_columns(run_dir: Path) -> str:
    """The per-sample figures Groups orders by, as written on the GPU: how many rows have each, and its range."""
    from grpo_lab.rundir.reader import TableReader

    read = TableReader(run_dir, "samples").read()
    if read.table is None:
        return "samples: none"
    df = read.table.to_pandas()
    parts = []
    for column in ("kl_mean", "clipped_tokens", "entropy_mean", "ratio_max"):
        if column not in df:
            parts.append(f"{column}: absent")
            continue
        values = df[column].dropna()
        parts.append(f"{column}: {len(values)}/{len(df)} rows" + (f", {values.min():.4g}..{values.max():.4g}" if len(values) else ""))
    return "per-sample columns (smollm2-shaped): " + "; ".join(parts)


def page_seconds(runs: Path, run: str) -> dict[str, float]:
    """Server-side seconds of the Live and Groups pages over a real GPU run (AppTest, as bench_dashboard)."""
    os.environ["GRPO_LAB_RUNS_DIR"] = str(runs)
    sys.path.insert(0, str(ROOT / "tests"))
    from app_helpers import open_page

    out = {}
    for page in ("live", "groups"):
        start = time.perf_counter()
        open_page(page, run)
        out[page] = time.perf_counter() - start
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpu-check"), help="folder for runs and models")
    parser.add_argument("--steps", type=int, default=12, help="steps of each run")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device here (torch.cuda.is_available() is False); run it on a machine with a GPU",
              file=sys.stderr)
        return 2
    out = Path(args.out)
    runs = out / "runs"
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}", flush=True)
    model = str(build_smollm2_shaped(out / "smollm2-shaped"))
    big = ["--model", model, "--dtype", "bfloat16", "--task", "arithmetic", "--sft-steps", "0", "--prompts-per-step", "16",
           "--group-size", "8", "--max-new-tokens", "64", "--passes", "2", "--beta", "0.04"]
    plan = [("demo", ["--max-steps", str(args.steps * 2)], False, 120),
            # the checkpoint's RNG state (CUDA's included) read back as data only (weights_only), then 4 more steps
            ("demo", ["--max-steps", str(args.steps * 2 + 4), "--resume"], False, 120),
            ("smollm2-shaped", ["--max-steps", str(args.steps), *big], False, 150),
            ("smollm2-shaped-torchrun", ["--max-steps", str(args.steps), *big], True, 150)]
    rows = []
    for name, flags, torchrun, timeout in plan:
        wall, outcome = train(runs, name, flags, torchrun, timeout)
        label = f"{name} --resume" if "--resume" in flags else name
        print(f"{label}: {outcome} in {wall:.0f} s", flush=True)
        rows.append((label, outcome, figures(runs / name) if (runs / name / "tables").exists() else {}))
    print("\n" + sample_columns(runs / "smollm2-shaped"), flush=True)
    print("\n| run | steps | s/step | tokens/s | generation tokens/s | MFU | peak GPU GB |\n|---|---|---|---|---|---|---|")
    for name, outcome, f in rows:
        cells = [f"{f[k]:.0f}" if k == "steps" else f"{f[k]:.3g}" for k in ("steps", "s/step", "tokens/s", "gen tokens/s",
                                                                           "mfu", "GPU GB")] if f else ["-"] * 6
        print(f"| {name} ({outcome}) | " + " | ".join(cells) + " |")
    try:
        import streamlit  # noqa: F401
    except ImportError:
        print("\ndashboard pages: skipped (streamlit is not installed here)")
        return 0
    seconds = page_seconds(runs, "smollm2-shaped")
    print("\ndashboard pages over the smollm2-shaped run (AppTest, server side): "
          + ", ".join(f"{page} {s:.2f} s" for page, s in seconds.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
