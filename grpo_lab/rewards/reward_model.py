"""A learned reward model: any `AutoModelForSequenceClassification`, scoring prompt + completion.

The model is loaded once, at build time (a wrong path fails at launch, not at step 1), from a
local directory or a Hugging Face Hub id, and runs batched without gradients on `device`.
The score is the logit `label` (0: the usual single-output reward model). When the tokenizer
has a chat template, the pair is rendered as a user turn and an assistant turn, the format
chat reward models were trained on; otherwise prompt and completion are concatenated.

    reward = reward_model_reward("path/to/reward-model", batch_size=8)
    reward(["2+2="], ["4"])  # -> [1.73]  (a raw logit: only differences within a group matter)
"""

from __future__ import annotations

import os

from grpo_lab.rewards._text import as_text


def reward_model_reward(
    model: str,
    device: str | None = None,
    batch_size: int = 16,
    max_length: int = 1024,
    label: int = 0,
    dtype: str | None = None,
    chat_template: bool | None = None,
):
    """model: a local directory or a Hub id; device: default cuda when available, else cpu;
    max_length: longer inputs keep their end (the completion); label: which logit is the score;
    dtype: e.g. "bfloat16" (default float32); chat_template: None uses it when the tokenizer has one."""
    import torch

    if batch_size < 1:
        raise ValueError(f"reward_model: batch_size must be at least 1, got {batch_size}")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer, net = load(model, dtype)
    if not 0 <= label < net.config.num_labels:
        labels = net.config.num_labels
        raise ValueError(f"reward_model: label {label} out of range; {model!r} has {labels} labels")
    net.to(device).eval()
    has_template = bool(getattr(tokenizer, "chat_template", None))
    templated = has_template if chat_template is None else chat_template

    def reward_model(prompts, completions, **columns) -> list[float]:
        texts = format_inputs(tokenizer, prompts, completions, templated)
        scores: list[float] = []
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(
                texts[start : start + batch_size], padding=True, truncation=True,
                max_length=max_length, return_tensors="pt", add_special_tokens=not templated,
            ).to(device)
            with torch.inference_mode():
                logits = net(**batch).logits  # (B, num_labels)
            scores.extend(logits[:, label].float().cpu().tolist())
        return scores

    return reward_model


def load(model: str, dtype: str | None = None):
    """(tokenizer, model) ready for batched scoring, or a one-line ValueError saying why not."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    local = os.path.isdir(model)
    if not local and model.startswith((".", "/", "~")):
        raise ValueError(f"reward_model: no such directory {model!r}")
    torch_dtype = getattr(torch, dtype) if dtype else None
    try:
        tokenizer = AutoTokenizer.from_pretrained(model)
        net = AutoModelForSequenceClassification.from_pretrained(model, dtype=torch_dtype)
    except Exception as exc:
        reason = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        if local:
            raise ValueError(f"reward_model: cannot load {model!r} ({reason})") from exc
        raise ValueError(
            f"reward_model: {model!r} is not a local directory and could not be fetched from the"
            f" Hugging Face Hub (offline?); download it first, or pass a local path ({reason})"
        ) from exc
    # Batches need padding; a reward model must find each sequence's last real token.
    tokenizer.truncation_side = "left"
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ValueError(f"reward_model: the tokenizer of {model!r} has no pad and no eos token")
        tokenizer.pad_token = tokenizer.eos_token
    if net.config.pad_token_id is None:
        net.config.pad_token_id = tokenizer.pad_token_id
    return tokenizer, net


def format_inputs(tokenizer, prompts, completions, templated: bool) -> list[str]:
    """The text the reward model reads for each (prompt, completion) pair.

    Prompts and completions may be strings or TRL's conversational message lists.
    """
    texts = []
    for prompt, completion in zip(prompts, completions):
        if templated:
            messages = _messages(prompt, "user") + _messages(completion, "assistant")
            texts.append(tokenizer.apply_chat_template(messages, tokenize=False))
        else:
            texts.append(_plain(prompt) + as_text(completion))
    return texts


def _messages(item, role: str) -> list[dict]:
    if isinstance(item, (list, tuple)) and all(isinstance(m, dict) for m in item):
        return [{"role": m.get("role", role), "content": str(m.get("content", ""))} for m in item]
    return [{"role": role, "content": as_text(item)}]


def _plain(prompt) -> str:
    if isinstance(prompt, (list, tuple)):
        return "\n".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in prompt)
    return str(prompt)
