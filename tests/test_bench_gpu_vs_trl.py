"""bench/gpu_vs_trl.py, the prepared GPU comparison, in what a CPU can check: the refusal without CUDA, equal
lengths for both trainers (an EOS no model can sample), and the parameter counts its MFU figures divide by.
(The whole script at toy sizes: `bash bench/gpu_vs_trl.sh --smoke`, a few minutes: not a test.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import gpu_vs_trl  # noqa: E402 - bench/ is not a package


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is what a machine without CUDA gets")
def test_the_script_refuses_at_once_without_cuda():
    result = subprocess.run(["bash", str(ROOT / "bench" / "gpu_vs_trl.sh")], capture_output=True, text=True,
                            timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "no CUDA device" in result.stderr


def test_every_row_decodes_max_new_tokens_the_eos_is_outside_the_models_vocabulary(tmp_path):
    from grpo_lab.trainer.decode import Sampling, decode_with_logp

    model, tokenizer = gpu_vs_trl.build_model("toy", "cpu", torch.float32)
    assert tokenizer.eos_token_id == model.config.vocab_size == gpu_vs_trl.SHAPES["toy"]["vocab"]
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id
    rows = gpu_vs_trl.write_prompts(tmp_path / "p.jsonl", 8).read_text().splitlines()
    texts = [json.loads(line)["prompt"] for line in rows]
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    assert enc["attention_mask"].all()  # one length: no padding in either trainer
    out = decode_with_logp(model, enc["input_ids"], enc["attention_mask"], Sampling(2, 12), tokenizer.eos_token_id,
                           tokenizer.pad_token_id)
    assert out.tokens.shape == (16, 12) and (out.tokens < model.config.vocab_size).all()


@pytest.mark.parametrize("shape, published", [("135m", 134_515_008), ("0.5b", 494_032_768), ("1.5b", 1_543_714_304)])
def test_the_parameter_counts_are_the_models_own(shape, published):
    assert gpu_vs_trl.params_of(shape) == published  # SmolLM2-135M, Qwen2.5-0.5B and -1.5B, embeddings tied


@pytest.mark.parametrize("shape", ["toy", "toy-qwen"])
def test_the_parameter_count_matches_a_built_model(shape):
    model, _ = gpu_vs_trl.build_model(shape, "cpu", torch.float32)
    assert gpu_vs_trl.params_of(shape) == sum(p.numel() for p in model.parameters())
