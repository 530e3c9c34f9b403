"""The built-in policy: a tiny Llama made from a config and a character tokenizer built locally.

Nothing is downloaded, so the demo, the tests and CI run anywhere on two CPU cores.
"""

from __future__ import annotations

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CHARACTERS = list("0123456789+-*=?. ") + list("abcdefghijklmnopqrstuvwxyz")
SPECIAL = {"pad_token": "<pad>", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}


def build_tokenizer() -> PreTrainedTokenizerFast:
    """One token per character; the same vocabulary every time, so no file needs shipping."""
    vocab = {tok: i for i, tok in enumerate(list(SPECIAL.values()) + CHARACTERS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIAL["unk_token"]))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()  # characters join back without spaces: "1","2" -> "12"
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, **SPECIAL)
    tokenizer.padding_side = "left"  # generation appends on the right
    return tokenizer


def build_model(tokenizer: PreTrainedTokenizerFast, seed: int) -> LlamaForCausalLM:
    """About 0.1M parameters: large enough to learn the task, small enough for a CPU demo."""
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return LlamaForCausalLM(config)
