"""What one checkpoint costs on disk (what --keep-every and --checkpoint-budget-gb spend): measured for the
built-in model, estimated for SmolLM2-135M and a 0.5B model (Qwen2.5-0.5B's shapes) from their parameter
counts, with the ratio measured on the built-in model (weights + AdamW's two moments, about 3x the weights).

    .venv/bin/python bench/bench_checkpoint_size.py

The larger models are built on the meta device (no download, no memory): only their parameter counts are
read. Prints bytes per checkpoint; a PPO run adds its value model (a copy of the body: about the weights again
times three).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

from grpo_lab.trainer import checkpoint, tiny

SHAPES = {  # the published configs' sizes (hidden, layers, heads, kv heads, MLP, vocabulary; tied embeddings)
    "SmolLM2-135M": LlamaConfig(hidden_size=576, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                                intermediate_size=1536, vocab_size=49152, tie_word_embeddings=True),
    "Qwen2.5-0.5B": Qwen2Config(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                                intermediate_size=4864, vocab_size=151936, tie_word_embeddings=True),
}


def measured_tiny() -> tuple[int, int]:
    """(parameters, bytes on disk) of a real checkpoint of the built-in model after one AdamW step."""
    model = tiny.build_model(tiny.build_tokenizer(), seed=0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sum(p.sum() for p in model.parameters()).backward()
    optimizer.step()  # the moments exist from the first step on
    with tempfile.TemporaryDirectory() as folder:
        saved = checkpoint.save(Path(folder), 1, {"model": model}, optimizer)
        return sum(p.numel() for p in model.parameters()), checkpoint.size_of(saved)


def parameters(config) -> int:
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())  # tied embeddings counted once


def main() -> None:
    params, size = measured_tiny()
    per_param = size / (params * 4)  # bytes on disk per byte of float32 weights
    print(f"built-in model: {params:,} parameters, checkpoint {size / 1e6:.2f} MB measured "
          f"({per_param:.2f}x its float32 weights)")
    for name, config in SHAPES.items():
        n = parameters(config)
        print(f"{name}: {n / 1e6:.1f}M parameters, checkpoint ~{n * 4 * per_param / 1e9:.2f} GB in float32, "
              f"~{n * 2 * per_param / 1e9:.2f} GB in bfloat16 (AdamW keeps its moments in the weights' dtype)")


if __name__ == "__main__":
    main()
