"""A real TRL GRPOTrainer on the project's tiny model, offline, for a few steps (about a second)."""

from __future__ import annotations

from pathlib import Path

from datasets import Dataset

from grpo_lab.trainer.tiny import build_model, build_tokenizer

G = 4  # num_generations


def correct(prompts, completions, answer, **kwargs):
    """1 when the completion starts with the answer: rare for an untrained model, so groups differ."""
    return [1.0 if c.strip().startswith(a) else 0.0 for c, a in zip(completions, answer)]


def digits(prompts, completions, **kwargs):
    """The share of digits in the completion (varies within a group), and no score (None) for
    prompts whose operands are equal: a reward function that leaves some completions out."""
    return [None if p[0] == p[2] else sum(ch.isdigit() for ch in c) / max(len(c), 1)
            for p, c in zip(prompts, completions)]


def model_dir(root: Path) -> Path:
    """The tiny Llama and its tokenizer saved as a folder: TRL loads its reference model from a path."""
    folder = root / "tiny-model"
    if not folder.exists():
        tokenizer = build_tokenizer()
        build_model(tokenizer, seed=0).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return folder


def run_trl(root: Path, output: str, callbacks=(), reward_funcs=(correct, digits), **overrides):
    """Train with TRL for `max_steps` (default 4) and return the trainer.

    Two micro-steps per optimizer step, and num_iterations=2: each generation batch (2 prompts x G)
    is trained on in steps 1-2 and again in 3-4, so batches are generated in steps 1 and 3 only,
    and TRL's completion log repeats them at steps 2 and 4. An evaluation runs after step 3.
    """
    from trl import GRPOConfig, GRPOTrainer  # a test-only dependency (requirements-trl.txt)

    tokenizer = build_tokenizer()
    rows = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a in range(4) for b in range(4)]
    settings = dict(
        output_dir=str(root / output), per_device_train_batch_size=4, gradient_accumulation_steps=2,
        num_generations=G, num_iterations=2, max_completion_length=4, max_steps=4, logging_steps=1,
        learning_rate=1e-3, beta=0.04, seed=0, use_cpu=True, report_to="none", save_strategy="no",
        log_completions=True, num_completions_to_print=0, eval_strategy="steps", eval_steps=3,
        per_device_eval_batch_size=4, disable_tqdm=True,
    )
    settings.update(overrides)
    trainer = GRPOTrainer(model=str(model_dir(root)), processing_class=tokenizer, reward_funcs=list(reward_funcs),
                          args=GRPOConfig(**settings), train_dataset=Dataset.from_list(rows),
                          eval_dataset=Dataset.from_list(rows[:4]), callbacks=list(callbacks))
    trainer.train()
    return trainer
