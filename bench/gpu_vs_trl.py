"""This trainer and TRL 1.16's GRPOTrainer side by side on one GPU: about 7 minutes of figures in one call.

    bash bench/gpu_vs_trl.sh                # on a CUDA machine: wheels, versions, then this driver
    bash bench/gpu_vs_trl.sh --only 0.5b    # a second, short call: setup, then the parts named
    .venv/bin/python bench/gpu_vs_trl.py --smoke   # the same code paths at toy sizes on a CPU (about 45 s of CPU)

One driver with a deadline (`--budget`, 420 s); every part is a subprocess with its own cap, and a part
that no longer fits in what is left is printed as skipped. After every part the notes are written again
(a call killed midway still returns what it measured); a part that fails, or whose figures cannot be read,
is that part's outcome and the next one runs. In order:
1. setup: versions, the GPU's name and its measured bf16 matrix-product rate (what MFU is read against),
   random-weight models saved in bfloat16: SmolLM2-135M's shape (Llama,
   30 layers, vocabulary 49,152) and Qwen2.5-0.5B's (Qwen2, 24 layers, vocabulary 151,936). Their tokenizer
   (one token a character, padded with placeholders to the vocabulary) has its EOS one id past the model's
   vocabulary: no model can sample it, so every row of both trainers decodes exactly max_new_tokens.
2. decode, 135M shape, 16 prompts x 8: the eager loop (dynamic cache), the static loop and the CUDA-graph
   loop (trainer/decode.py), tokens per second each, the graph loop's first call (compilation) apart; the
   output check the graph path needs (transformers #45323 replayed stale graphs): greedy tokens of graphs
   against static, and the sampler's log-probs against the training forward's (token_logprobs); and the
   cost of the phase timer's synchronise (timing.py), per phase edge.
3. 135M shape, 16 prompts x 8, 256 tokens: ours, then TRL; 0.5B shape, 8 x 8, 512 tokens: TRL, then ours.
   1 warm-up + 3 timed steps each (the warm-up holds the compilation). Same work: 1 pass (TRL
   num_iterations=1), beta 0.04 (both load a reference), token-level loss (TRL "dapo"), N-1 std (TRL
   scale_rewards "group"), lr 1e-6, temperature 1, top_k 0, top_p 1, bf16 weights, no gradient checkpointing,
   TRL without vLLM and without continuous batching, the same prompts (one length, no padding) and the
   same TRL-style reward (bench_vs_trl.reward).
4. What each fits of Qwen2.5-1.5B's shape: rows 16 (2 prompts x 8) at 512, 1024, 2048, ... tokens until
   one runs out of memory: one training step's forwards and backward (pi_old, the reference, the update
   and AdamW) on random completions of that length, each trainer's own functions, plus the KV cache
   decoding that many tokens holds (ours: a static cache kept through the step; TRL: a dynamic cache of
   the same size, freed before training). Sampling itself is not run: at 8,192 tokens it alone would take
   minutes.
Printed last: s/step, tokens/s, the phase split (synchronised), peak GPU memory and MFU for each run, and
the probes. The figures go to $OUT (the device machine's folder that comes back): gpu_vs_trl.md (the table),
gpu_vs_trl.json (every figure) and gpu_vs_trl.log (each part's output); the machine keeps nothing, so copy
the notes into bench/notes/ in the repository after a run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

SHAPES = {  # the models' own configs (hub config.json), random weights
    "135m": dict(family="llama", hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                 num_key_value_heads=3, vocab=49152, rope_theta=100000.0, rms_norm_eps=1e-5),
    "0.5b": dict(family="qwen2", hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, vocab=151936, rope_theta=1000000.0, rms_norm_eps=1e-6),
    "1.5b": dict(family="qwen2", hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2, vocab=151936, rope_theta=1000000.0, rms_norm_eps=1e-6),
    # --smoke: the same families at toy sizes
    "toy": dict(family="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab=512, rope_theta=10000.0, rms_norm_eps=1e-5),
    "toy-qwen": dict(family="qwen2", hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, vocab=1024, rope_theta=10000.0, rms_norm_eps=1e-6),
}
SETTINGS = dict(beta=0.04, lr=1e-6)
# runs: (shape, prompts, G, max_new_tokens); steps: 1 warm-up + the timed ones; at_least: seconds a part
# needs to be worth starting (else printed as skipped); caps: the most seconds each may run. The budget, 420 s
# of parts, leaves a device call (600 s) room for the wheels, the preflight and the notes (bench/gpu_vs_trl.sh),
# and 15 minutes of device time room for a second, short call (--only) after the first machine's start.
GPU = dict(budget=420, runs=[("135m", 16, 8, 256), ("0.5b", 8, 8, 512)], decode=("135m", 16, 8, 256),
           probe=("1.5b", 16, [512, 1024, 2048, 4096, 8192]), steps=4, repeats=50, timed=2,
           caps=dict(setup=90, decode=120, run=110, probe=60), at_least=dict(setup=20, decode=40, run=45, probe=35))
# --smoke: about 45 s of CPU, most of it imports (91 to 146 s on the shared 2-core machine, the latter at load
# 12-18); the budget leaves room for a machine shared with others
SMOKE = dict(budget=360, runs=[("toy-qwen", 2, 2, 8)], decode=("toy", 4, 2, 8), probe=("toy-qwen", 4, [8]), steps=2,
             repeats=3, timed=1, caps=dict(setup=150, decode=180, run=200, probe=120),
             at_least=dict(setup=5, decode=5, run=5, probe=5))
PROMPT_LEN = 8  # "012+345=": every prompt one length, so no padding in either trainer


# --- models, tokenizer, prompts ----------------------------------------------------------------------


def build_tokenizer(vocab: int):
    """One token a character, placeholders up to `vocab`, and EOS at id `vocab`: outside the model's logits."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special = ["<pad>", "<s>", "<unk>"]
    chars = list("0123456789+-*=?. ") + list("abcdefghijklmnopqrstuvwxyz")
    names = special + chars
    names += [f"<u{i}>" for i in range(vocab - len(names))]
    table = {name: i for i, name in enumerate(names)} | {"</s>": vocab}
    core = Tokenizer(models.WordLevel(vocab=table, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                        unk_token="<unk>")
    tokenizer.padding_side = "left"
    return tokenizer


def model_config(shape: str, tokenizer):
    from transformers import LlamaConfig, Qwen2Config

    s = dict(SHAPES[shape])
    family, vocab = s.pop("family"), s.pop("vocab")
    common = dict(vocab_size=vocab, tie_word_embeddings=True, max_position_embeddings=16384,
                  pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                  eos_token_id=tokenizer.eos_token_id, **s)
    return LlamaConfig(**common) if family == "llama" else Qwen2Config(**common, use_sliding_window=False)


def build_model(shape: str, device, dtype):
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = build_tokenizer(SHAPES[shape]["vocab"])
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(model_config(shape, tokenizer)).to(dtype)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def save_model(shape: str, folder: Path, device, dtype) -> Path:
    if not (folder / "config.json").exists():
        model, tokenizer = build_model(shape, device, dtype)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return folder


def write_prompts(path: Path, n: int = 256) -> Path:
    rows = [{"prompt": f"{a:03d}+{b:03d}=", "answer": str(a + b)} for a, b in ((i * 37 % 1000, i * 91 % 1000)
                                                                                for i in range(n))]
    assert all(len(r["prompt"]) == PROMPT_LEN for r in rows)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def params_of(shape: str) -> int:
    """Parameters of the shape (embeddings tied), from the config alone."""
    s = SHAPES[shape]
    h, i, layers, heads, kv = (s["hidden_size"], s["intermediate_size"], s["num_hidden_layers"],
                               s["num_attention_heads"], s["num_key_value_heads"])
    head = h // heads
    bias = 0 if s["family"] == "llama" else h + 2 * kv * head
    per_layer = h * h * 2 + 2 * h * kv * head + bias + 3 * h * i + 2 * h
    return s["vocab"] * h + layers * per_layer + h


# --- parts (each run in its own process) -----------------------------------------------------------


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def part_setup(a) -> dict:
    import torch

    from gpu_preflight import versions

    device = torch.device(a.device)
    dtype = getattr(torch, a.dtype)
    out = {"versions": versions(), "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
           "cpu_threads": torch.get_num_threads()}
    if device.type == "cuda":  # the rate MFU is read against: 8192^3 bf16 products, 3 warm-ups, the mean of 10
        x = torch.randn(8192, 8192, dtype=torch.bfloat16, device=device)
        for _ in range(3):
            x @ x
        sync(device)
        start = time.perf_counter()
        for _ in range(10):
            x @ x
        sync(device)
        out["bf16 matmul TFLOP/s"] = round(10 * 2 * 8192 ** 3 / (time.perf_counter() - start) / 1e12, 1)
        del x
    for shape in dict.fromkeys(s for s in a.shapes.split(",") if s):
        start = time.perf_counter()
        save_model(shape, Path(a.work) / shape, device, dtype)
        out[f"built {shape} s"] = round(time.perf_counter() - start, 1)
    write_prompts(Path(a.work) / "prompts.jsonl")
    return out


def part_decode(a) -> dict:
    """Decode tokens/s of each loop, the graph loop's output check, and the phase timer's sync cost."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_lab.trainer.decode import Sampling, decode_with_logp
    from grpo_lab.trainer.rollout import sample, token_logprobs
    from grpo_lab.trainer.timing import PhaseTimer

    device, dtype = torch.device(a.device), getattr(torch, a.dtype)
    folder = str(Path(a.work) / a.shape)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).to(device).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    prompts = [json.loads(line)["prompt"] for line in (Path(a.work) / "prompts.jsonl").read_text().splitlines()]
    prompts = prompts[:a.prompts]
    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
    rows, T = a.prompts * a.group, a.tokens
    out: dict = {"shape": a.shape, "rows": rows, "tokens": T}

    def timed(loop: str, greedy: bool = False, seed: int = 0):
        torch.manual_seed(seed)
        sync(device)
        start = time.perf_counter()
        d = decode_with_logp(model, enc["input_ids"], enc["attention_mask"],
                             Sampling(a.group, T, greedy=greedy, decode=loop), tokenizer.eos_token_id,
                             tokenizer.pad_token_id)
        sync(device)
        return d, time.perf_counter() - start

    graphs = "graphs" if device.type == "cuda" else "static"  # a CPU has no CUDA graphs: static stands in
    for loop in ("eager", "static", graphs):
        first = timed(loop)[1]
        seconds = [timed(loop, seed=s)[1] for s in range(1, 1 + a.timed)]
        out[f"{loop} tokens/s"] = round(rows * T / min(seconds), 1)
        out[f"{loop} first call s"] = round(first, 2)
        print(f"decode {loop}: first call {first:.2f} s, then {min(seconds):.3f} s", file=sys.stderr, flush=True)
    out["graphs vs eager"] = round(out[f"{graphs} tokens/s"] / out["eager tokens/s"], 2)
    # the output check: greedy tokens of the graph loop against the static loop (uncompiled), position by position
    g, s = timed(graphs, greedy=True)[0], timed("static", greedy=True)[0]
    same = (g.tokens == s.tokens).long().cumprod(dim=1).sum(dim=1).float()  # tokens before the first difference
    out["greedy: rows equal (graphs vs static)"] = round(float((same == T).float().mean()), 3)
    out["greedy: mean tokens before a difference"] = round(float(same.mean()), 1)
    # the sampler's log-probs against the training forward's, on the graph loop's own rollout
    torch.manual_seed(3)
    rollout = sample(model, tokenizer, prompts, Sampling(a.group, T, decode=graphs), device)
    with torch.no_grad():
        trained, _ = token_logprobs(model, rollout)
    gap = (rollout.sampler_logp.float() - trained.float())[rollout.completion_mask.bool()].abs()
    out["sampler logp - training logp: mean |gap|"] = float(gap.mean())
    out["sampler logp - training logp: max |gap|"] = float(gap.max())
    # the phase timer's synchronise: a one-token forward per phase, timed with and without it
    ids = enc["input_ids"].repeat_interleave(a.group, dim=0)[:, -1:]
    seconds = {}
    for label, fn in (("none", lambda: None), ("sync", lambda: sync(device))) * 2:  # twice: the second of each counts
        timer = PhaseTimer(sync=fn)
        sync(device)
        start = time.perf_counter()
        for _ in range(a.repeats):
            with torch.no_grad(), timer.phase("update"):
                model(input_ids=ids)
        sync(device)
        seconds[label] = time.perf_counter() - start
    out["phase-edge sync cost, us per edge"] = (round((seconds["sync"] - seconds["none"]) / (2 * a.repeats) * 1e6, 1)
                                                if device.type == "cuda" else None)  # a CPU run synchronises nothing
    out["one-token forward, ms"] = round(seconds["none"] / a.repeats * 1e3, 3)
    return out


def part_trl(a) -> dict:
    """TRL's GRPOTrainer on the same work: s/step, phases (synchronised), peak memory."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from bench_vs_trl import reward

    device = torch.device(a.device)
    folder = str(Path(a.work) / a.shape)
    ends, lengths = [], []
    phases: dict[str, list[float]] = {"generation": [], "reward": [], "logp_nograd": [], "sampling_total": [],
                                      "training_step": []}

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            sync(device)
            ends.append(time.perf_counter())

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "completions/mean_length" in logs:
                lengths.append(logs["completions/mean_length"])

    rows = [json.loads(line) for line in (Path(a.work) / "prompts.jsonl").read_text().splitlines()]
    n = a.prompts * a.group
    cuda = device.type == "cuda"
    args = GRPOConfig(output_dir=str(Path(a.work) / f"trl-{a.shape}"), per_device_train_batch_size=n,
                      gradient_accumulation_steps=1, num_generations=a.group, num_iterations=1,
                      max_completion_length=a.tokens, max_steps=a.steps, logging_steps=1,
                      learning_rate=SETTINGS["lr"], beta=SETTINGS["beta"], loss_type="dapo", scale_rewards="group",
                      temperature=1.0, top_k=0, top_p=1.0, seed=0, use_cpu=not cuda, bf16=cuda,
                      gradient_checkpointing=False, use_vllm=False, use_transformers_continuous_batching=False,
                      disable_dropout=True, log_completions=False, report_to="none", save_strategy="no",
                      disable_tqdm=True, model_init_kwargs={"dtype": a.dtype})
    trainer = GRPOTrainer(model=folder, reward_funcs=[reward], args=args, train_dataset=Dataset.from_list(rows),
                          callbacks=[Clock()])

    def timed(name: str, method, only_without_grad: bool = False):
        def wrapper(*args_, **kwargs):
            sync(device)
            start = time.perf_counter()
            try:
                return method(*args_, **kwargs)
            finally:
                if not only_without_grad or not torch.is_grad_enabled():
                    sync(device)
                    phases[name].append(time.perf_counter() - start)
        return wrapper

    trainer._generate = timed("generation", trainer._generate)
    trainer._calculate_rewards = timed("reward", trainer._calculate_rewards)
    trainer._get_per_token_logps_and_entropies = timed("logp_nograd", trainer._get_per_token_logps_and_entropies,
                                                       only_without_grad=True)
    trainer._generate_and_score_completions = timed("sampling_total", trainer._generate_and_score_completions)
    trainer.training_step = timed("training_step", trainer.training_step)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    trainer.train()
    step_s = [b - c for c, b in zip(ends, ends[1:])]
    k = len(step_s)  # the first step (warm-up) is left out of every phase too
    mean = {name: sum(v[-k:]) / k if k and v else 0.0 for name, v in phases.items()}
    split = {"generation": mean["generation"], "reward": mean["reward"], "old_logp+ref": mean["logp_nograd"],
             "update": mean["training_step"] - mean["sampling_total"]}
    split["other"] = statistics.mean(step_s) - sum(split.values()) if step_s else math.nan
    return {"step_s": step_s, "length": statistics.mean(lengths[1:]) if lengths[1:] else math.nan, "phases": split,
            "peak_gb": torch.cuda.max_memory_allocated(device) / 1e9 if cuda else math.nan}


def part_probe(a) -> dict:
    """The largest completion length (at `rows` rows) one training step fits, for one trainer."""
    import copy

    import torch

    from grpo_lab.objective.functions import grpo_loss
    from grpo_lab.objective.options import LossSettings
    from grpo_lab.trainer.decode import StaticDecoder
    from grpo_lab.trainer.rollout import Rollout, token_logprobs

    device, dtype = torch.device(a.device), getattr(torch, a.dtype)
    cuda = device.type == "cuda"
    folder = Path(a.work) / a.shape
    start = time.perf_counter()
    if a.trainer == "ours":
        policy, tokenizer = build_model(a.shape, device, dtype)
        if not (folder / "config.json").exists():  # TRL's probe loads it from here
            policy.save_pretrained(folder)
            tokenizer.save_pretrained(folder)
        reference = copy.deepcopy(policy).eval()
        optimizer = torch.optim.AdamW(policy.parameters(), lr=SETTINGS["lr"])
    else:
        from datasets import Dataset
        from trl import GRPOConfig, GRPOTrainer

        from bench_vs_trl import reward

        args = GRPOConfig(output_dir=str(Path(a.work) / "trl-probe"), per_device_train_batch_size=a.rows,
                          num_generations=8 if a.rows % 8 == 0 else a.rows, num_iterations=1, max_completion_length=64,
                          beta=SETTINGS["beta"], loss_type="dapo", use_cpu=not cuda, bf16=cuda,
                          gradient_checkpointing=False, report_to="none", save_strategy="no", disable_tqdm=True,
                          model_init_kwargs={"dtype": a.dtype})
        trainer = GRPOTrainer(model=str(folder), reward_funcs=[reward], args=args,
                              train_dataset=Dataset.from_list([{"prompt": "000+000="}] * 8))
        trainer.current_gradient_accumulation_steps = 1  # what its training loop sets before compute_loss
        policy = trainer.model
        policy.train()
        optimizer = torch.optim.AdamW(policy.parameters(), lr=SETTINGS["lr"])
    config = policy.config
    head_dim = config.hidden_size // config.num_attention_heads
    kv_bytes = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * dtype.itemsize  # a row's token
    print(f"probe {a.trainer}: model ready in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    P, R = PROMPT_LEN, a.rows

    def one_step(T: int) -> None:
        """pi_old, the reference, the update and AdamW on R random completions of T tokens; its tensors
        go when it returns, so the next size starts from the weights and optimizer state alone."""
        ids = torch.randint(3, config.vocab_size, (R, P + T), device=device)
        mask = torch.ones_like(ids)
        advantages = torch.randn(R, device=device)
        if a.trainer == "ours":
            static = StaticDecoder(policy, R, P + T, graphs=False)  # kept through the step, as the trainer keeps it
            static.cache.early_initialization(R, config.num_key_value_heads, head_dim, dtype, device)
            rollout = Rollout(input_ids=ids, attention_mask=mask, prompt_len=P, completion_mask=mask[:, P:],
                              truncated=torch.zeros(R, dtype=torch.bool, device=device), completions=[""] * R,
                              generation_s=0.0)
            with torch.no_grad():
                old, _ = token_logprobs(policy, rollout, with_entropy=True)
                ref, _ = token_logprobs(reference, rollout)
            logp, _ = token_logprobs(policy, rollout)
            loss = grpo_loss(logp=logp, old_logp=old, ref_logp=ref, advantages=advantages, mask=mask[:, P:].float(),
                             settings=LossSettings(beta=SETTINGS["beta"], aggregation="token")).loss
        else:
            cache = torch.empty(R * (P + T) * kv_bytes, dtype=torch.uint8, device=device)  # generate's cache, freed
            del cache
            with torch.no_grad():
                ref, _, _ = trainer._get_per_token_logps_and_entropies(trainer.ref_model, ids, mask, T)
            inputs = {"prompt_ids": ids[:, :P], "prompt_mask": mask[:, :P], "completion_ids": ids[:, P:],
                      "completion_mask": mask[:, P:], "advantages": advantages, "ref_per_token_logps": ref,
                      "num_items_in_batch": mask[:, P:].sum()}
            loss = trainer.compute_loss(policy, inputs)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        sync(device)

    results = []
    for T in a.ladder:
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        start = time.perf_counter()
        try:
            one_step(T)
            peak = torch.cuda.max_memory_allocated(device) / 1e9 if cuda else math.nan
            results.append({"tokens": T, "fits": True, "peak_gb": round(peak, 2),
                            "s": round(time.perf_counter() - start, 2),
                            "kv_cache_gb": round(R * (P + T) * kv_bytes / 1e9, 2)})
        except torch.OutOfMemoryError:
            optimizer.zero_grad(set_to_none=True)
            results.append({"tokens": T, "fits": False})
        print("PROBE " + json.dumps(results[-1]), flush=True)
        if not results[-1]["fits"]:
            break
    return {"trainer": a.trainer, "rows": R, "results": results}


def part_worker(a) -> None:
    fn = {"setup": part_setup, "decode": part_decode, "trl": part_trl, "probe": part_probe}[a.part]
    print("RESULT " + json.dumps(fn(a)), flush=True)


# --- the driver --------------------------------------------------------------------------------------


@dataclass
class Part:
    """One subprocess of the plan, and where its figures go."""

    name: str  # printed, and what --only matches
    where: tuple[str, ...]  # the figures' keys it is written under: ("decode",), ("runs", "ours 135m"), ...
    cmd: list[str]
    cap: float  # seconds it may run
    at_least: float  # seconds it needs to be worth starting (else printed as skipped)
    read: Callable[[str], dict | None] = field(default=lambda stdout: result_of(stdout))  # its figures
    known: dict = field(default_factory=dict)  # figures known before it runs (shape, rows, tokens)
    needed: bool = False  # the parts after it cannot run without it (setup: the models)


class Stopped(Exception):
    """The driver was sent SIGTERM (the shell's `timeout`): the part running is written as killed."""


class Driver:
    def __init__(self, budget: float, out: Path, env: dict) -> None:
        self.deadline = time.perf_counter() + budget
        self.out, self.env = out, env
        self.log = (out / "gpu_vs_trl.log").open("a")

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def run(self, name: str, cmd: list[str], cap: float, at_least: float) -> tuple[str, str]:
        """(outcome, stdout) of one part: ok, exit N, timed out, or skipped when less than `at_least` is left."""
        left = self.left() - 5  # the table and notes need a moment
        if left < at_least:
            print(f"{name}: skipped ({left:.0f} s left, needs {at_least:.0f})", flush=True)
            return "skipped (time)", ""
        cap = min(cap, left)
        start = time.perf_counter()
        try:
            done = subprocess.run(cmd, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=cap)
            stdout, stderr = done.stdout, done.stderr
            outcome = "ok" if done.returncode == 0 else f"exit {done.returncode}: " + (
                (stderr.strip().splitlines() or [""])[-1][:200])
        except subprocess.TimeoutExpired as exc:
            stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            outcome = f"timed out after {cap:.0f} s"
        self.log.write(f"=== {name} ({outcome}, {time.perf_counter() - start:.1f} s)\n$ {' '.join(cmd)}\n"
                       f"{stdout}\n--- stderr\n{stderr[-20000:]}\n")
        self.log.flush()
        print(f"{name}: {outcome} in {time.perf_counter() - start:.0f} s", flush=True)
        return outcome, stdout

    def play(self, parts: list[Part], figures: dict) -> dict[str, str]:
        """Each part in turn, the notes written after every one: a call killed midway (the shell's timeout, the
        device's limit) still returns what it measured. A part that fails, or whose figures cannot be read, is
        that part's outcome; the next part runs (unless the failed one was `needed`). Returns each outcome."""
        def stop(signum, _frame):
            raise Stopped(signal.Signals(signum).name)

        previous = signal.signal(signal.SIGTERM, stop)
        blocked, outcomes = None, {}
        try:
            for part in parts:
                outcome, got = f"skipped ({blocked} failed)", {}
                if not blocked:
                    outcome = "failed to start"
                    try:
                        outcome, stdout = self.run(part.name, part.cmd, part.cap, part.at_least)
                        if not outcome.startswith("skipped"):
                            got = part.read(stdout) or {}
                    except Stopped as exc:
                        place(figures, part.where, {"outcome": f"killed ({exc}) while running", **part.known})
                        write_notes(self.out, figures)
                        raise
                    except Exception as exc:  # noqa: BLE001 - one part's failure, not the driver's
                        outcome = f"{outcome}; then {type(exc).__name__}: {str(exc)[:200]}"
                        print(f"{part.name}: {outcome}", flush=True)
                    if part.needed and outcome != "ok":
                        blocked = part.name
                place(figures, part.where, {"outcome": outcome, **part.known, **got})
                write_notes(self.out, figures)
                outcomes[part.name] = outcome
            return outcomes
        finally:
            signal.signal(signal.SIGTERM, previous)


def place(figures: dict, where: tuple[str, ...], entry: dict) -> None:
    """figures[where[0]][where[1]]... = entry, the sections made as needed."""
    for key in where[:-1]:
        figures = figures.setdefault(key, {})
    figures[where[-1]] = entry


def result_of(stdout: str) -> dict | None:
    line = next((l for l in reversed(stdout.splitlines()) if l.startswith("RESULT ")), None)
    return json.loads(line[len("RESULT "):]) if line else None


def probes_of(stdout: str) -> dict:
    return {"results": [json.loads(l[len("PROBE "):]) for l in stdout.splitlines() if l.startswith("PROBE ")]}


def ours_figures(run_dir: Path) -> dict:
    """s/step, phases and GPU figures of a trainer run, steps after the first, from its scalars table."""
    from grpo_lab.rundir.reader import TableReader

    read = TableReader(run_dir, "scalars").read()
    if read.table is None:
        return {}
    df = read.table.to_pandas().sort_values("step")
    later = df.iloc[1:]
    step_s = df["wall_s"].diff().iloc[1:].tolist()
    mean = lambda c: float(later[c].mean()) if c in later and later[c].notna().any() else math.nan  # noqa: E731
    split = {"generation": mean("time/generation_s"), "reward": mean("time/reward_s"),
             "old_logp+ref": mean("time/old_logp_s") + mean("time/ref_s"), "update": mean("time/update_s")}
    split["other"] = statistics.mean(step_s) - sum(split.values()) if step_s else math.nan
    return {"step_s": step_s, "length": mean("completion/length_mean"), "phases": split,
            "peak_gb": float(df["perf/gpu_memory_gb"].max()) if "perf/gpu_memory_gb" in df else math.nan,
            "generation tokens/s": mean("perf/generation_tokens_per_s"), "logged mfu": mean("perf/mfu")}


def plan_parts(plan: dict, me: list[str], work: Path, device: str, dtype: str, only: list[str]) -> list[Part]:
    """The parts in order: setup, decode, the side by side (order alternating), the probes; with `only`, the
    parts whose name holds one of its words, after a setup that builds just the models they read."""
    caps, need = plan["caps"], plan["at_least"]
    parts: list[Part] = []
    shape, prompts, group, tokens = plan["decode"]
    parts.append(Part("decode", ("decode",), [*me, "--part", "decode", "--shape", shape, "--prompts", str(prompts),
                                              "--group", str(group), "--tokens", str(tokens)], caps["decode"],
                      need["decode"], known={"shape": shape, "rows": prompts * group, "tokens": tokens}))
    for i, (shape, prompts, group, tokens) in enumerate(plan["runs"]):
        known = {"shape": shape, "rows": prompts * group, "tokens": tokens}
        for which in (("ours", "trl") if i % 2 == 0 else ("trl", "ours")):
            name = f"{which} {shape}"
            if which == "ours":
                runs, run = work / "runs", f"ours-{shape}-{int(time.time())}"
                cmd = [sys.executable, "-m", "grpo_lab.trainer", "--runs-dir", str(runs), "--name", run,
                       "--model", str(work / shape), "--task", str(work / "prompts.jsonl"), "--chat-template", "off",
                       "--rewards", "bench_vs_trl:reward", "--max-steps", str(plan["steps"]),
                       "--prompts-per-step", str(prompts), "--group-size", str(group), "--max-new-tokens", str(tokens),
                       "--passes", "1", "--beta", str(SETTINGS["beta"]), "--lr", str(SETTINGS["lr"]),
                       "--std-mode", "sample", "--loss-aggregation", "token", "--temperature", "1.0",
                       "--sft-steps", "0",
                       "--stop-on", "none", "--dtype", dtype, "--device", device, "--decode", "auto", "--seed", "0"]
                parts.append(Part(name, ("runs", name), cmd, caps["run"], need["run"],
                                  read=lambda _stdout, d=runs / run: ours_figures(d), known=known))
            else:
                parts.append(Part(name, ("runs", name), [*me, "--part", "trl", "--shape", shape, "--prompts",
                                                         str(prompts), "--group", str(group), "--tokens", str(tokens)],
                                  caps["run"], need["run"], known=known))
    shape, rows, ladder = plan["probe"]
    for which in ("ours", "trl"):
        parts.append(Part(f"probe {which} {shape}", ("probes", which),
                          [*me, "--part", "probe", "--trainer", which, "--shape", shape, "--rows", str(rows),
                           "--ladder", ",".join(map(str, ladder))],
                          caps["probe"], need["probe"], read=probes_of, known={"shape": shape, "rows": rows}))
    if only:
        parts = [p for p in parts if any(word in p.name for word in only)]
    shapes = [p.known["shape"] for p in parts if p.where[0] in ("decode", "runs")]
    setup = Part("setup", ("setup",), [*me, "--part", "setup", "--shapes", ",".join(dict.fromkeys(shapes))],
                 caps["setup"], need["setup"], needed=True)
    return [setup, *parts]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true",
                        help="toy sizes on the CPU: the same code paths (about 45 s of CPU)")
    parser.add_argument("--budget", type=float, help="seconds for every part together (default 420; --smoke 360)")
    parser.add_argument("--only", type=lambda s: [w.strip() for w in s.split(",") if w.strip()], default=[],
                        help="the parts whose name holds one of these comma-separated words, after the setup: "
                             "decode, 'ours 135m', 'trl 135m', 'trl 0.5b', 'ours 0.5b', 'probe ours', 'probe trl'; "
                             "e.g. --only 0.5b (both 0.5b runs) or --only probe")
    parser.add_argument("--out", default=os.environ.get("OUT") or "/tmp/gpu-vs-trl/out",
                        help="folder for the notes, JSON and log (default: $OUT, else /tmp/gpu-vs-trl/out)")
    for flag in ("--part", "--work", "--device", "--dtype", "--shape", "--shapes", "--trainer"):
        parser.add_argument(flag, help=argparse.SUPPRESS)
    for flag in ("--prompts", "--group", "--tokens", "--rows", "--steps", "--repeats", "--timed"):
        parser.add_argument(flag, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ladder", type=lambda s: [int(x) for x in s.split(",")], help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.part:
        part_worker(a)
        return 0
    plan = SMOKE if a.smoke else GPU
    device, dtype = ("cpu", "float32") if a.smoke else ("cuda", "bfloat16")
    work = Path(os.environ.get("GPU_VS_TRL_WORK", "/tmp/gpu-vs-trl"))
    me = [sys.executable, str(Path(__file__).resolve()), "--work", str(work), "--device", device, "--dtype", dtype,
          "--steps", str(plan["steps"]), "--repeats", str(plan["repeats"]), "--timed", str(plan["timed"])]
    parts = plan_parts(plan, me, work, device, dtype, a.only)
    if len(parts) == 1:
        names = ", ".join(p.name for p in plan_parts(plan, me, work, device, dtype, [])[1:])
        print(f"gpu_vs_trl: --only: {', '.join(a.only)} names no part (the parts: {names})", file=sys.stderr)
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join([str(ROOT), str(ROOT / "bench"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    driver = Driver(a.budget or plan["budget"], out, env)
    figures: dict = {"smoke": a.smoke, "only": a.only, "runs": {}, "probes": {}}
    try:
        outcomes = driver.play(parts, figures)
    except Stopped as exc:
        print(f"gpu_vs_trl: stopped by {exc}; the notes hold every part that finished", file=sys.stderr)
        return 143
    print("\n" + write_notes(out, figures), flush=True)
    short = [f"{name} ({outcome})" for name, outcome in outcomes.items() if outcome != "ok"]
    if short:  # the notes hold what there is; the exit status says it is not everything
        print(f"gpu_vs_trl: {len(short)} of {len(outcomes)} parts not ok: {'; '.join(short)}", file=sys.stderr)
    return 1 if short else 0


def write_notes(out: Path, figures: dict) -> str:
    """gpu_vs_trl.json (every figure) and gpu_vs_trl.md (the table) in `out`, as far as the parts have come; the
    JSON first, so a table that cannot be made still leaves every figure. Returns the Markdown."""
    (out / "gpu_vs_trl.json").write_text(json.dumps(figures, indent=1, default=str))
    try:
        text = table(figures)
    except Exception as exc:  # noqa: BLE001 - the JSON beside it holds the figures
        text = f"# gpu_vs_trl\n\nthe table failed ({type(exc).__name__}: {exc}); every figure is in gpu_vs_trl.json\n"
    (out / "gpu_vs_trl.md").write_text(text)
    return text


def table(figures: dict) -> str:
    """The notes in Markdown: one row a run, the ratios, the decode figures and the probes. MFU against the
    card's measured bf16 matrix-product rate when setup measured it, else its listed peak (trainer/perf.py)."""
    setup = figures.get("setup") or {}
    device = setup.get("device", "?")
    measured = setup.get("bf16 matmul TFLOP/s")
    peak = measured * 1e12 if measured else math.nan
    if not measured and device not in ("?", "cpu"):
        from grpo_lab.trainer.perf import peak_flops  # imports torch: only where it answers

        peak = peak_flops(device)
    lines = [f"# gpu_vs_trl {'(smoke, CPU)' if figures.get('smoke') else ''} {time.strftime('%Y-%m-%d %H:%M')}", "",
             f"device: {device}; setup: {setup.get('outcome', 'not run')}; MFU against "
             + (f"{measured} TFLOP/s measured" if measured else "the listed peak")
             + f"; versions: {json.dumps(setup.get('versions', {}))}", "",
             "| run | outcome | rows x tokens | s/step (median of timed) | tokens/s | generation | reward "
             "| old_logp+ref "
             "| update | other | peak GB | MFU |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in figures.get("runs", {}).items():
        steps = r.get("step_s") or []
        if not steps:
            lines.append(f"| {name} | {r['outcome']} | {r['rows']} x {r['tokens']} |" + " - |" * 9)
            continue
        s = statistics.median(steps)
        tokens = r["rows"] * (r.get("length") or r["tokens"])
        mfu = 8 * params_of(r["shape"]) * tokens / s / peak  # 2N a sampled token, 6N a trained one (1 pass)
        ph = r["phases"]
        lines.append(f"| {name} | {r['outcome']} | {r['rows']} x {r['tokens']} | {s:.3f} | {tokens / s:.0f} | "
                     + " | ".join(f"{ph[k]:.3f}" for k in ("generation", "reward", "old_logp+ref", "update", "other"))
                     + f" | {r.get('peak_gb', math.nan):.2f} | {mfu:.4f} |")
    for shape in dict.fromkeys(r["shape"] for r in figures.get("runs", {}).values()):
        ours, trl = figures["runs"].get(f"ours {shape}", {}), figures["runs"].get(f"trl {shape}", {})
        if ours.get("step_s") and trl.get("step_s"):
            ratio = statistics.median(ours["step_s"]) / statistics.median(trl["step_s"])
            lines.append(f"\n{shape}: ours / TRL seconds per step = {ratio:.2f}")
    if isinstance(figures.get("decode"), dict):
        lines += ["", "decode (trainer/decode.py): " + json.dumps(figures["decode"])]
    for which, p in figures.get("probes", {}).items():
        results = p.get("results", [])
        fits = [r for r in results if r.get("fits")]
        best = f"{p['rows']} x {fits[-1]['tokens']}" if fits else "none"
        lines.append(f"\nprobe {which} {p['shape']} ({p['outcome']}): largest rows x tokens that fit: {best}; "
                     + "; ".join(f"{r['tokens']}: " + (f"{r['peak_gb']} GB, {r['s']} s" if r.get("fits")
                                                       else "out of memory")
                                 for r in results))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
