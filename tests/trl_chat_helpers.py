"""A real TRL GRPOTrainer on a conversational dataset with a `solution` column, and rewards written TRL's
way: `completions[i]` is the message list [{"role": "assistant", "content": ...}], the dataset's columns
come as keywords. The tiny model with Qwen2.5's chat template (TRL renders conversational prompts)."""

from __future__ import annotations

from pathlib import Path

from datasets import Dataset

from grpo_lab.trainer.tiny import build_model, build_tokenizer

G = 4  # num_generations
ROWS = [{"prompt": [{"role": "user", "content": f"{a}+{b}="}], "solution": str(a + b)}
        for a in range(4) for b in range(4)]


def closeness(prompts, completions, solution, **kwargs):
    """How far the answer's length is from the solution's value (-0.1 per character): reads the
    `solution` column and `completion[0]["content"]`; varies within a group of an untrained model."""
    return [-abs(len(c[0]["content"]) - int(s)) / 10 for c, s in zip(completions, solution)]


def closeness_from_prompt(prompts, completions, **kwargs):
    """closeness with the solution worked out from the prompt's message ("a+b="): the same scores,
    no dataset column (what an import, which keeps no columns, can be rescored with)."""
    sums = [str(int(p[-1]["content"][0]) + int(p[-1]["content"][2])) for p in prompts]
    return closeness(prompts, completions, sums)


def digit_share(prompts, completions, **kwargs):
    """The share of digits in the answer, and no score (None) where the operands are equal."""
    return [None if p[-1]["content"][0] == p[-1]["content"][2] else
            sum(ch.isdigit() for ch in c[0]["content"]) / max(len(c[0]["content"]), 1)
            for p, c in zip(prompts, completions)]


def chat_model_dir(root: Path) -> Path:
    """The tiny Llama with Qwen2.5's chat template, saved as a folder (TRL loads its model from a path)."""
    from trl.chat_template_utils import qwen2_5_chat_template

    folder = root / "tiny-chat-model"
    if not folder.exists():
        tokenizer = build_tokenizer()
        tokenizer.chat_template = qwen2_5_chat_template
        build_model(tokenizer, seed=0).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return folder


def run_chat(root: Path, output: str, callbacks=(), reward_funcs=(closeness, digit_share), **overrides):
    """Train with TRL for 3 steps, one generation batch of 2 prompts x G per step (24 completions),
    saving the output folder an import reads (completions/, checkpoint-3/ with training_args.bin)."""
    from trl import GRPOConfig, GRPOTrainer  # a test-only dependency (requirements-trl.txt)
    from trl.chat_template_utils import qwen2_5_chat_template

    folder = chat_model_dir(root)
    tokenizer = build_tokenizer()
    tokenizer.chat_template = qwen2_5_chat_template
    settings = dict(
        output_dir=str(root / output), per_device_train_batch_size=4, gradient_accumulation_steps=2,
        num_generations=G, num_iterations=1, max_completion_length=6, max_steps=3, logging_steps=1,
        learning_rate=1e-3, beta=0.0, seed=0, use_cpu=True, report_to="none", save_strategy="steps", save_steps=3,
        log_completions=True, num_completions_to_print=0, disable_tqdm=True, reward_weights=[1.0, 0.5],
    )
    settings.update(overrides)
    trainer = GRPOTrainer(model=str(folder), processing_class=tokenizer,
                          reward_funcs=list(reward_funcs), args=GRPOConfig(**settings),
                          train_dataset=Dataset.from_list(ROWS), callbacks=list(callbacks))
    trainer.train()
    return trainer
