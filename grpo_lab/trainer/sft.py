"""Supervised warm start (the chapter's SFT before RL) for the built-in model."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import torch
from tqdm import tqdm

REPORT_S = 1.0  # at most one progress report (status.json) a second: a write per step would cost more than a tiny step


def warm_start(model, tokenizer, pairs: list[tuple[str, str | tuple[tuple[str, bool], ...]]], steps: int,
               device: torch.device, lr: float = 3e-3, batch_size: int = 64,
               log: logging.Logger | None = None, progress: Callable[[int, int], None] | None = None,
               bar: bool = True) -> float:
    """Cross-entropy on the completion tokens only (the prompt is context, not a target).

    A completion given as (text, trained) segments leaves the untrained ones out of the loss too:
    a tool's result in a warm-start example is context, as in the RL loss (trainer/multiturn.py),
    so the warm start teaches the call without teaching the answers the tool gives.

    It can take minutes (a tool task under load: many), so it is never silent: a tqdm bar (`bar`),
    a log line every tenth of the way, and `progress(done, total)` at the start, at most once a
    second, and at the end (the trainer writes it to status.json's `phase`, which Live shows)."""
    if steps == 0:
        return float("nan")
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    loss = torch.tensor(float("nan"))
    every = max(1, steps // 10)
    if progress:
        progress(0, steps)
    reported = time.monotonic()
    for step in tqdm(range(steps), desc="warm start", unit="step", mininterval=1.0, dynamic_ncols=True,
                     disable=not bar):
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
        done = step + 1
        if log and (done % every == 0) and done < steps:
            log.info("warm start: step %d/%d, loss %.3f", done, steps, loss.item())
        if progress and (done == steps or time.monotonic() - reported >= REPORT_S):
            progress(done, steps)
            reported = time.monotonic()
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
