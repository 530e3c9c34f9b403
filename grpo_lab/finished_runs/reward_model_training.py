"""grpo-lab-train-rm: a reward model from the ratings people gave runs (Bradley-Terry on pairs).

Pairs come from ranks and from scores within a group (grpo_lab/finished_runs/preferences.py); the loss is
Bradley-Terry's, -log sigmoid(r(chosen) - r(rejected)) (Ouyang et al. 2022, eq. 1). The held-out
pairs are those of a seeded fraction of the *prompts*: a model that memorised a prompt's answers
cannot score well on them. It prints the held-out pairwise accuracy (share of held-out pairs whose
chosen completion scores higher) and writes a Hugging Face `AutoModelForSequenceClassification`
directory (one logit) that the `reward_model` reward loads unchanged; the text it reads is made by
that reward's own `format_inputs`, so training and scoring see the same string.

What is trained (`--train`):
- `all` (default for the built-in `tiny` model): every weight. The built-in model is randomly
  initialised (85 k parameters), so its body holds no features worth freezing, and a full
  fine-tune takes seconds on a CPU.
- `head` (default for a Hugging Face model, e.g. SmolLM2-135M): the pretrained body frozen, only
  the score head trained. The body's last-token states already describe the text; a linear head on
  them trains on a CPU in minutes, where a full fine-tune of 135 M parameters would take hours.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path


class RMError(ValueError):
    """A bad option or unusable ratings: one line naming the option."""


def build_model(model: str, seed: int):
    """(tokenizer, AutoModelForSequenceClassification with one logit) from `tiny` or a HF model path."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, LlamaForSequenceClassification

    if model == "tiny":
        from grpo_lab.trainer import tiny  # noqa: PLC0415

        tokenizer = tiny.build_tokenizer()
        tokenizer.truncation_side = "left"  # as the reward_model reward loads it: keep the completion
        config = tiny.build_model(tokenizer, seed).config
        config.num_labels = 1
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            return tokenizer, LlamaForSequenceClassification(config)
    if not Path(model).expanduser().is_dir():
        raise RMError(f"model: {model!r} is not 'tiny' or a Hugging Face model directory")
    try:
        tokenizer = AutoTokenizer.from_pretrained(model)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            net = AutoModelForSequenceClassification.from_pretrained(model, num_labels=1)
    except Exception as exc:  # noqa: BLE001 - any load failure is one line
        raise RMError(f"model: cannot load {model!r} ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})") from None
    tokenizer.truncation_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    net.config.pad_token_id = tokenizer.pad_token_id
    return tokenizer, net


def trainable(net, train: str) -> list:
    """The parameters `train` updates; the others are frozen (requires_grad False)."""
    if train == "all":
        return [p for p in net.parameters()]
    head = net.score if hasattr(net, "score") else net.get_output_embeddings()
    for p in net.parameters():
        p.requires_grad_(False)
    for p in head.parameters():
        p.requires_grad_(True)
    return list(head.parameters())


def scores(net, tokenizer, prompts: list[str], completions: list[str], max_length: int, templated: bool,
           batch_size: int = 64):
    """r(prompt, completion) for each pair, as the reward_model reward computes it (one logit)."""
    import torch

    from grpo_lab.rewards.reward_model import format_inputs  # noqa: PLC0415

    texts = format_inputs(tokenizer, prompts, completions, templated)
    out = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(texts[start:start + batch_size], padding=True, truncation=True, max_length=max_length,
                          return_tensors="pt", add_special_tokens=not templated)
        out.append(net(**batch).logits[:, 0])
    return torch.cat(out) if out else torch.zeros(0)


def accuracy(net, tokenizer, df, max_length: int, templated: bool) -> float:
    """Share of pairs whose chosen completion scores higher (NaN without pairs)."""
    import torch

    if df.empty:
        return math.nan
    with torch.no_grad():
        chosen = scores(net, tokenizer, df["prompt"].tolist(), df["chosen"].tolist(), max_length, templated)
        rejected = scores(net, tokenizer, df["prompt"].tolist(), df["rejected"].tolist(), max_length, templated)
    return float((chosen > rejected).float().mean())


def train_rm(runs: list[str], out: str, *, model: str = "tiny", train: str | None = None, epochs: int = 10,
             lr: float | None = None, batch_size: int = 16, eval_fraction: float = 0.2, seed: int = 0,
             max_length: int = 256, log=print) -> dict:
    """Train and save; returns the figures written to `out/rm_training.json`."""
    import pandas as pd
    import torch

    from grpo_lab.finished_runs.preferences import pairs, split_by_prompt  # noqa: PLC0415

    train = train or ("all" if model == "tiny" else "head")
    if train not in ("all", "head"):
        raise RMError(f"train: must be all or head, got {train!r}")
    if not 0 <= eval_fraction < 1:
        raise RMError(f"eval_fraction: must be in [0, 1), got {eval_fraction}")
    for name, value in (("epochs", epochs), ("batch_size", batch_size), ("max_length", max_length)):
        if value < 1:
            raise RMError(f"{name}: must be at least 1, got {value}")
    for run in runs:
        if not Path(run).is_dir():
            raise RMError(f"runs: {run!r} is not a run directory")
    df = pd.concat([pairs(run) for run in runs], ignore_index=True)
    if df.empty:
        raise RMError(f"runs: no preference pairs in the ratings of {', '.join(runs)} (rate at least two "
                      "completions of a group differently)")
    df = df.assign(prompt_id=df["run"] + "/" + df["prompt_id"])
    train_df, held = split_by_prompt(df, eval_fraction, seed)
    tokenizer, net = build_model(model, seed)
    templated = bool(getattr(tokenizer, "chat_template", None))
    params = trainable(net, train)
    lr = lr if lr is not None else 1e-3
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    log(f"pairs: {len(train_df)} to train on ({train_df['prompt_id'].nunique()} prompts), {len(held)} held out "
        f"({held['prompt_id'].nunique()} prompts); model {model}, training {train} "
        f"({sum(p.numel() for p in params):,} parameters)")
    rng = random.Random(seed)
    torch.manual_seed(seed)
    start = time.time()
    order = list(range(len(train_df)))
    for epoch in range(1, epochs + 1):
        net.train()
        rng.shuffle(order)
        losses = []
        for i in range(0, len(order), batch_size):
            part = train_df.iloc[order[i:i + batch_size]]
            prompts = part["prompt"].tolist()
            chosen = scores(net, tokenizer, prompts, part["chosen"].tolist(), max_length, templated)
            rejected = scores(net, tokenizer, prompts, part["rejected"].tolist(), max_length, templated)
            loss = -torch.nn.functional.logsigmoid(chosen - rejected).mean()  # Bradley-Terry
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        net.eval()
        if epoch == epochs or epoch % max(1, epochs // 5) == 0:
            log(f"epoch {epoch}/{epochs}: loss {sum(losses) / len(losses):.4f}, held-out pairwise accuracy "
                f"{accuracy(net, tokenizer, held, max_length, templated):.3f}")
    figures = {"train_pairs": len(train_df), "heldout_pairs": len(held),
               "train_accuracy": accuracy(net, tokenizer, train_df, max_length, templated),
               "heldout_accuracy": accuracy(net, tokenizer, held, max_length, templated),
               "model": model, "train": train, "epochs": epochs, "lr": lr, "seed": seed, "runs": runs,
               "seconds": round(time.time() - start, 1)}
    Path(out).mkdir(parents=True, exist_ok=True)
    for p in net.parameters():
        p.requires_grad_(True)
    net.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (Path(out) / "rm_training.json").write_text(json.dumps(figures, indent=2))
    log(f"held-out pairwise accuracy: {figures['heldout_accuracy']:.3f} ({len(held)} pairs); "
        f"train {figures['train_accuracy']:.3f}; model written to {out}")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grpo-lab-train-rm", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="run directories whose ratings (labels/) to learn from")
    parser.add_argument("--out", required=True, help="the model directory to write (loads with the reward_model reward)")
    parser.add_argument("--model", default="tiny", help="'tiny' (built-in) or a Hugging Face model directory")
    parser.add_argument("--train", choices=("all", "head"), default=None,
                        help="all weights, or a frozen body and the score head; default: all for tiny, head otherwise")
    parser.add_argument("--epochs", type=int, default=10, help="passes over the training pairs")
    parser.add_argument("--lr", type=float, default=None, help="AdamW learning rate (default 1e-3)")
    parser.add_argument("--batch-size", type=int, default=16, help="pairs per update")
    parser.add_argument("--eval-fraction", type=float, default=0.2, help="share of prompts held out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-length", type=int, default=256, help="tokens per input; longer ones keep their end")
    args = parser.parse_args(argv)
    try:
        train_rm(args.runs, args.out, model=args.model, train=args.train, epochs=args.epochs, lr=args.lr,
                 batch_size=args.batch_size, eval_fraction=args.eval_fraction, seed=args.seed,
                 max_length=args.max_length)
    except RMError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
