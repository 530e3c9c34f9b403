"""Supervised warm start (the chapter's SFT before RL) for the built-in model."""

from __future__ import annotations

import logging

import torch


def warm_start(model, tokenizer, pairs: list[tuple[str, str | tuple[tuple[str, bool], ...]]], steps: int,
               device: torch.device, lr: float = 3e-3, batch_size: int = 64,
               log: logging.Logger | None = None) -> float:
    """Cross-entropy on the completion tokens only (the prompt is context, not a target).

    A completion given as (text, trained) segments leaves the untrained ones out of the loss too:
    a tool's result in a warm-start example is context, as in the RL loss (trainer/multiturn.py),
    so the warm start teaches the call without teaching the answers the tool gives."""
    if steps == 0:
        return float("nan")
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    loss = torch.tensor(float("nan"))
    for step in range(steps):
        batch = [pairs[(step * batch_size + i) % len(pairs)] for i in range(batch_size)]
        prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p, _ in batch]
        targets = [_segments(tokenizer, c) for _, c in batch]
        target_ids = [ids + [tokenizer.eos_token_id] for ids, _ in targets]
        width = max(len(p) + len(t) for p, t in zip(prompt_ids, target_ids))
        ids = torch.full((batch_size, width), tokenizer.pad_token_id)
        labels = torch.full((batch_size, width), -100)
        attn = torch.zeros((batch_size, width), dtype=torch.long)
        for row, (p, t) in enumerate(zip(prompt_ids, target_ids)):
            seq = p + t
            ids[row, : len(seq)] = torch.tensor(seq)
            labels[row, len(p): len(seq)] = torch.tensor([i if keep else -100 for i, keep in
                                                          zip(t, targets[row][1] + [True])])
            attn[row, : len(seq)] = 1
        loss = model(input_ids=ids.to(device), attention_mask=attn.to(device), labels=labels.to(device)).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    if log:
        log.info("warm start: %d SFT steps, final loss %.3f", steps, loss.item())
    return loss.item()


def _segments(tokenizer, completion) -> tuple[list[int], list[bool]]:
    """A completion's token ids and, per token, whether it is a target."""
    parts = [(completion, True)] if isinstance(completion, str) else completion
    ids, keep = [], []
    for text, trained in parts:
        part = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids, keep = ids + part, keep + [trained] * len(part)
    return ids, keep
