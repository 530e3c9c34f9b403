"""Programs tests/trainer/test_distributed.py runs under torchrun (and, to compare, as one plain process).

    python tests/distributed_worker.py update OUT_DIR
        One GRPO update of the tiny model on a fixed synthetic batch of 8 responses, for each loss
        aggregation and (with several processes) each strategy, through the trainer's own pieces:
        Dist.share, wrap, token_logprobs, grpo_loss, Dist.loss_scale, clip_grad_norm_, AdamW.
        Rank 0 saves OUT_DIR/<strategy>-<aggregation>.pt: {"weights": ..., "grad_norm": ...}.

    python tests/distributed_worker.py raise RANK STEP TRAINER_ARGS...
        python -m grpo_lab.trainer TRAINER_ARGS, except that process RANK raises in step STEP.

    python tests/distributed_worker.py hang RANK STEP TRAINER_ARGS...
        The same, except that process RANK reports a failure and then hangs (as a process stuck in
        a CUDA call would: the others' collectives with it wait instead of failing).
"""

from __future__ import annotations

import dataclasses
import signal
import sys
import time
from pathlib import Path

import torch

from grpo_lab.trainer import tiny
from grpo_lab.trainer.config import Config
from grpo_lab.trainer.distributed import Dist, launch, wrap
from grpo_lab.trainer.updates import loss_scale
from grpo_lab.trainer.models import unwrap
from grpo_lab.objective.functions import LOSS_AGGREGATIONS, LossSettings, grpo_loss
from grpo_lab.trainer.rollout import Rollout, token_logprobs

B, T, MAX_LEN = 8, 6, 6  # responses, completion width, max_new_tokens


def synthetic_batch(tokenizer) -> dict:
    """The same batch on every process: prompts, completions of uneven length (so the ranks hold
    different token counts), two truncated responses (both in the second half: rank 1's), and
    pi_old / pi_ref numbers that move ratios off 1 so that some tokens clip."""
    gen = torch.Generator().manual_seed(7)
    prompts = [f"{a}+{b}=" for a, b in ((1, 2), (3, 4), (0, 5), (2, 2), (5, 5), (4, 1), (3, 3), (1, 0))]
    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    lengths = torch.tensor([1, 2, 3, 4, 6, 6, 5, 2])
    truncated = torch.tensor([False, False, False, False, True, True, False, False])
    ids = torch.randint(4, len(tokenizer), (B, T), generator=gen)
    completion_mask = (torch.arange(T)[None, :] < lengths[:, None]).long()
    ids[torch.arange(B), (lengths - 1).clamp(max=T - 1)] = torch.where(
        truncated, ids[torch.arange(B), lengths - 1], torch.full((B,), tokenizer.eos_token_id))
    ids = ids * completion_mask + tokenizer.pad_token_id * (1 - completion_mask)
    return {
        "input_ids": torch.cat([enc["input_ids"], ids], dim=1),
        "attention_mask": torch.cat([enc["attention_mask"], completion_mask], dim=1),
        "prompt_len": enc["input_ids"].shape[1],
        "completion_mask": completion_mask,
        "truncated": truncated,
        "advantages": torch.randn(B, generator=gen),
        "old_shift": 0.3 * torch.randn(B, T, generator=gen),
        "ref_shift": 0.2 * torch.randn(B, T, generator=gen),
    }


def one_update(d: Dist, aggregation: str, out: Path) -> None:
    tokenizer = tiny.build_tokenizer()
    model = wrap(d, tiny.build_model(tokenizer, seed=0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)  # the trainer's optimiser
    full = synthetic_batch(tokenizer)
    rows = torch.tensor(d.share(list(range(B))))
    rollout = Rollout(input_ids=full["input_ids"][rows], attention_mask=full["attention_mask"][rows],
                      prompt_len=full["prompt_len"], completion_mask=full["completion_mask"][rows],
                      truncated=full["truncated"][rows], completions=[""] * len(rows), generation_s=0.0)
    mask = rollout.completion_mask.float()
    logp, _ = token_logprobs(model, rollout)
    result = grpo_loss(logp=logp, old_logp=logp.detach() + full["old_shift"][rows],
                       ref_logp=logp.detach() + full["ref_shift"][rows], advantages=full["advantages"][rows],
                       mask=mask, settings=LossSettings(beta=0.04, aggregation=aggregation, max_len=MAX_LEN),
                       truncated=rollout.truncated if aggregation == "sequence" else None)
    scale = loss_scale(d, result.loss_mask, aggregation)
    optimizer.zero_grad(set_to_none=True)
    (result.loss * scale).backward()
    grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05))  # clips: the norm is larger
    optimizer.step()
    if d.strategy == "fsdp":
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        weights = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    else:
        weights = {k: v.detach().clone() for k, v in unwrap(model).state_dict().items()}
    if d.writer:
        torch.save({"weights": weights, "grad_norm": grad_norm}, out / f"{d.strategy or 'single'}-{aggregation}.pt")


def main(argv: list[str]) -> int:
    if argv[0] == "update":
        out = Path(argv[1])
        d = launch(Config())
        strategies = ("ddp", "fsdp") if d.active else (None,)
        for strategy in strategies:
            for aggregation in LOSS_AGGREGATIONS:
                one_update(dataclasses.replace(d, strategy=strategy), aggregation, out)
        d.close()
        return 0
    if argv[0] in ("raise", "hang"):
        from grpo_lab.trainer import grpo as trainer_grpo
        from grpo_lab.trainer.__main__ import main as trainer_main

        rank, step, real = int(argv[1]), int(argv[2]), trainer_grpo.grpo_step

        def flaky(c, s):
            if c.dist.rank == rank and s == step:
                if argv[0] == "hang":
                    c.dist.report_failure("RuntimeError: stuck on purpose")
                    # the launcher's SIGTERM ends it at once (a process stuck in CUDA would wait for
                    # the SIGKILL that torchrun sends 30 s later: slower, not different)
                    signal.signal(signal.SIGTERM, signal.SIG_DFL)
                    time.sleep(600)
                raise RuntimeError(f"boom on rank {rank} at step {s}")
            return real(c, s)

        trainer_grpo.grpo_step = flaky
        return trainer_main(argv[3:])
    raise SystemExit(f"unknown mode {argv[0]!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
