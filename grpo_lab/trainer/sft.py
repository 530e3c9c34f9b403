"""Supervised warm start (the chapter's SFT before RL) for the built-in model."""

from __future__ import annotations

import logging

import torch


def warm_start(model, tokenizer, pairs: list[tuple[str, str]], steps: int, device: torch.device,
               lr: float = 3e-3, batch_size: int = 64, log: logging.Logger | None = None) -> float:
    """Cross-entropy on the completion tokens only (the prompt is context, not a target)."""
    if steps == 0:
        return float("nan")
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    loss = torch.tensor(float("nan"))
    for step in range(steps):
        batch = [pairs[(step * batch_size + i) % len(pairs)] for i in range(batch_size)]
        prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p, _ in batch]
        target_ids = [tokenizer(c, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for _, c in batch]
        width = max(len(p) + len(t) for p, t in zip(prompt_ids, target_ids))
        ids = torch.full((batch_size, width), tokenizer.pad_token_id)
        labels = torch.full((batch_size, width), -100)
        attn = torch.zeros((batch_size, width), dtype=torch.long)
        for row, (p, t) in enumerate(zip(prompt_ids, target_ids)):
            seq = p + t
            ids[row, : len(seq)] = torch.tensor(seq)
            labels[row, len(p): len(seq)] = torch.tensor(t)
            attn[row, : len(seq)] = 1
        loss = model(input_ids=ids.to(device), attention_mask=attn.to(device), labels=labels.to(device)).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    if log:
        log.info("warm start: %d SFT steps, final loss %.3f", steps, loss.item())
    return loss.item()
