"""The static loop's one-token step (trainer/decode.py, StaticDecoder) traced by torch.compile on the CPU as one
graph: fullgraph=True (a graph break raises), dynamic=False, one trace for every token of two decodes (no
recompile), and the tokens of the uncompiled loop; on Llama and Qwen2 shapes. On CUDA the "graphs" loop captures
this same graph as CUDA graphs: a break or a recompile here would be one there, found only on a GPU.

The backend counts the graphs dynamo hands it and runs them as traced (no code generation): inductor on these
2 CPU cores would add its C++ compilation to the fast suite, and the question here is dynamo's, not inductor's.
"""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from grpo_lab.trainer import decode as decode_module, tiny
from grpo_lab.trainer.decode import Sampling, decode_with_logp
from test_decode_loops import rounding_allows

PROMPTS = ["1+2=", "13+4=", "5+15=", "7+0="]  # two lengths: left padding in the cache's mask
G, MAX_NEW = 2, 20


def tiny_model(kind: str, tokenizer) -> torch.nn.Module:
    common = dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                  pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    return (LlamaForCausalLM(LlamaConfig(**common)) if kind == "llama" else
            Qwen2ForCausalLM(Qwen2Config(**common, use_sliding_window=False))).eval()


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_the_static_step_compiles_as_one_graph_for_every_token_of_two_decodes(kind):
    tokenizer = tiny.build_tokenizer()
    model = tiny_model(kind, tokenizer)
    enc = tokenizer(PROMPTS, return_tensors="pt", padding=True, add_special_tokens=False)
    never = model.config.vocab_size  # an EOS no row can draw: every row decodes MAX_NEW tokens

    def decoded(seed: int):
        torch.manual_seed(seed)
        return decode_with_logp(model, enc["input_ids"], enc["attention_mask"], Sampling(G, MAX_NEW, decode="static"),
                                eos_id=never, pad_id=tokenizer.pad_token_id, check_every=4)

    plain = [decoded(seed) for seed in (1, 2)]
    (decoder,) = decode_module._DECODERS[model].values()  # the static loop's, kept beside the model
    graphs, steps = [], []

    def count(graph: torch.fx.GraphModule, _example_inputs):
        graphs.append(graph)
        return graph.forward

    compiled = torch.compile(decode_module._one_token, backend=count, fullgraph=True, dynamic=False)
    decoder.forward = lambda *args: steps.append(1) or compiled(*args)
    torch._dynamo.reset()
    try:
        again = [decoded(seed) for seed in (1, 2)]
    finally:
        torch._dynamo.reset()
    assert len(steps) == 2 * (MAX_NEW - 1)  # every token after the prompt's went through the compiled step
    assert len(graphs) == 1  # traced once: no break (fullgraph would raise), no recompile across tokens or decodes
    assert any("index_copy" in str(node.target) for node in graphs[0].graph.nodes)  # the cache write is inside it
    for want, got in zip(plain, again):
        assert want.tokens.shape == (len(PROMPTS) * G, MAX_NEW) and torch.equal(got.tokens, want.tokens)
        # the traced graph runs the same float32 operations, a few of them in another order (1 or 2 ulp apart)
        assert (got.logp - want.logp).abs().max() <= rounding_allows(model, temperature=1.0)
