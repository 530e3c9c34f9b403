"""A training run from config to finished run directory: checks, set-up, the step loop, shutdown.

Order matters for "bad input leaves nothing behind": everything that can be refused (config,
run name, rewards, model) is checked before the run directory is created, and a disk too full to
create it leaves nothing either (open_run).
"""

from __future__ import annotations

import gc
import logging
import math
import os
import random
import resource
import shutil
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from tqdm import tqdm

from grpo_lab.rundir.metrics import registered_name
from grpo_lab.rundir.layout import NO_SPACE, RunLock, RunPaths, free_reserve, full_disk, make_reserve, write_json_atomic
from grpo_lab.rundir.status import StatusFile
from grpo_lab.rundir import trackers
from grpo_lab.rundir.writer import RunWriter
from grpo_lab.trainer import checkpoint, fork
from grpo_lab.trainer.config import Config, ConfigError, report_targets
from grpo_lab.trainer.preflight import check_run_dir, claim
from grpo_lab.trainer.checkpoint import resume_latest, save_checkpoint
from grpo_lab.trainer.distributed import Dist, NullStatus, NullWriter, launch, rank_log, watch_peers, wrap
from grpo_lab.trainer.doctor import Doctor, Finding, stops
from grpo_lab.trainer import outcome
from grpo_lab.trainer.lens import Trends
from grpo_lab.trainer.models import load_policy, pick_device
from grpo_lab.trainer.evaluate import due as eval_due, evaluate
from grpo_lab.tools.registry import template_tools
from grpo_lab.trainer import multiturn
from grpo_lab.trainer.components import Components
from grpo_lab.trainer.data import build_tasks
from grpo_lab.trainer.tasks import Task
from grpo_lab.trainer.setup import build_rewards, dry_run, frozen_copy, make_optimizer
from grpo_lab.trainer.sft import warm_start
from grpo_lab.trainer.step_records import combine_across_ranks
from grpo_lab.trainer.step_result import StepResult, first_notes
from grpo_lab.trainer.tasks import render


class StopRequested:
    """SIGTERM / SIGINT set a flag; the loop finishes its step, then flushes and checkpoints."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.previous = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGTERM, signal.SIGINT)}

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum, _frame) -> None:
        self.signal = signum

    def __bool__(self) -> bool:
        return self.signal is not None


def open_log(paths: RunPaths) -> logging.Logger:
    log = logging.getLogger(f"grpo_lab.trainer.{paths.root.name}")
    log.setLevel(logging.INFO)
    log.propagate = False
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(message)s")
    for handler in (logging.FileHandler(paths.log), logging.StreamHandler(sys.stderr)):
        handler.setFormatter(fmt)
        log.addHandler(handler)
    return log


def close_log(log: logging.Logger) -> None:
    for handler in log.handlers:
        handler.close()
    log.handlers.clear()


def peak_memory_mb(device: torch.device) -> float:
    """Peak accelerator memory on CUDA; peak resident memory of this process on CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def open_run(cfg: Config, paths: RunPaths, lock: RunLock | None, rewards: dict[str, float] | None = None
             ) -> tuple[RunLock, logging.Logger, StatusFile]:
    """The run directory's first files, all of them or none: the folder (a new run's is created
    exclusively: of two trainers started with one name, one wins and the other gets one line),
    the lock (`lock`, when a resume took it already), the disk reserve, train.log, config.json and
    a "starting" status.json. `rewards`: every reward source the run scores with and its weight,
    for config.json (an environment's get_reward beside the configured rewards, as TRL names it).

    When the disk (or anything else) refuses one of them, a new run's folder goes: this process
    created it, so everything in it is its own. A resumed run keeps all it had; only the reserve
    goes. A refusal that names the disk is one line (exit 2), as for any input refused."""
    made, log = False, None
    try:
        if not cfg.resume:
            try:
                paths.root.mkdir()
            except FileExistsError:
                raise ConfigError(f"name: a run named {cfg.name!r} was just created in {paths.root.parent}/ by "
                                  "another trainer; choose another name") from None
            made = True
        lock = lock or claim(cfg, paths)
        make_reserve(paths)
        log = open_log(paths)
        write_json_atomic(paths.config, {**cfg.run_record(), **({"rewards": rewards} if rewards else {})})
        status = StatusFile(paths.status, name=cfg.name, algo=cfg.algo, model=cfg.model, task=cfg.task,
                            total_steps=cfg.max_steps)
        status.update(state="starting")
    except Exception as exc:
        if log is not None:
            close_log(log)
        if made:
            shutil.rmtree(paths.root, ignore_errors=True)  # before the lock goes: no one can enter it meanwhile
        elif lock is not None:  # a resume: the run is this process's to write, its other files stay
            free_reserve(paths)
        if lock is not None:
            lock.release()
        if isinstance(exc, OSError):
            field, doing = ("resume", "write to") if cfg.resume else ("runs_dir", "create")
            raise ConfigError(f"{field}: cannot {doing} run {cfg.name!r} in {paths.root.parent}/: "
                              f"{full_disk(paths.root.parent, exc) or exc.strerror or exc}") from None
        raise
    return lock, log, status


def disk_note(paths: RunPaths, exc: BaseException, error: str) -> tuple[str, bool]:
    """A failure's error for status.json, and whether the disk is full. The run is over: its disk
    reserve is freed (and on a full disk a half-written checkpoint too), so that its status and
    log lines fit. A full disk not named in the error (torch.save does not say) is added to it."""
    full = full_disk(paths.root, exc)
    free_reserve(paths)
    if full:
        checkpoint.remove_partial(paths.checkpoints)
    return (f"{error} ({full})" if full and NO_SPACE not in error else error), bool(full)


def release(comps: Components) -> None:
    """Undo `prepare` for a caller that stepped the components itself (a benchmark, a test): the
    writer's last rows, the log's files and the run's lock."""
    comps.writer.close()
    trackers.end_reporting(comps.writer)
    close_log(comps.log)
    if comps.lock is not None:
        comps.lock.release()


def prepare(cfg: Config, d: Dist | None = None, tasks: tuple[Task, Task | None] | None = None
            ) -> tuple[Components, RunPaths, StatusFile, int]:
    """Refusable checks first, then the run directory. Returns (components, paths, status, first step).
    `tasks`: (training, held-out) as preflight built them; built here when not given.

    With several processes rank 0 alone checks, creates and writes the run directory; each
    `d.agreed()` block ends with every rank knowing whether any refused (then all exit 2).
    Without `d`: one process, as `python -m grpo_lab.trainer` and the benchmarks run."""
    d = d or Dist()
    paths = RunPaths(cfg.run_dir)
    forking = bool(cfg.fork_from) and not cfg.resume  # a resumed fork has the checkpoints it was given
    with d.agreed():
        lock, source = check_run_place(cfg, paths, forking) if d.writer else (None, None)
    with d.agreed():
        loaded = load_inputs(cfg, d, tasks)

    # --- from here on the run directory exists ---
    log, status = rank_log(d.rank), NullStatus()
    with d.agreed():
        if d.writer:
            lock, log, status = open_run(cfg, paths, lock, {name: w for name, (_fn, w) in loaded.reward_fns.items()})
    for line in loaded.warnings if d.writer else ():
        log.warning("%s", line)
    try:
        start_weights(cfg, d, paths, loaded, forking=forking, source=source, log=log, status=status)
        comps = build_components(cfg, d, paths, loaded, log=log, lock=lock)
        first_step = resume_run(cfg, d, paths, comps, forking=forking) if cfg.resume or forking else 1
        if d.writer:  # report_to: the trackers get what the writer gets (rank 0 alone: it has every rank's rows)
            comps.writer = trackers.reporting(comps.writer, report_targets(cfg.report_to), run_dir=paths.root,
                                              run_name=cfg.name, config=cfg.run_record(), log=log)
    except Exception as exc:  # the run exists: its status says why it ended, rather than "killed?"
        if d.writer:
            error, _ = disk_note(paths, exc, f"{type(exc).__name__}: {exc}")
            log.error("failed while setting up: %s", error)  # the traceback follows, from the caller
            status.update(state="failed", error=error)
            close_log(log)
            lock.release()
        raise
    return comps, paths, status, first_step


def check_run_place(cfg: Config, paths: RunPaths, forking: bool) -> tuple[RunLock | None, Path | None]:
    """Rank 0, before anything is loaded: the run directory may be created (or resumed: its lock taken,
    its newest checkpoint checked), and a fork's parent checkpoint is whole. Returns (the resume's lock,
    the checkpoint a fork starts from); each None where there is none."""
    check_run_dir(cfg)
    source = None
    if forking:  # the parent's checkpoint, checked as a resume's own (read, never locked: it may train on)
        source = fork.check(cfg)
        checkpoint.check(source)
    lock = claim(cfg, paths) if cfg.resume else None  # a resume fails fast; a new run claims below
    if cfg.resume:  # a checkpoint holding more than data (a planted pickle) is refused, unrun
        try:
            checkpoint.check(checkpoint.latest(paths.checkpoints))
        except ConfigError:
            lock.release()
            raise
    return lock, source


@dataclass
class Loaded:
    """What set-up checked and loaded before the run directory exists: any of it may refuse the run."""

    reward_fns: dict[str, tuple[Callable, float]]
    task: Task  # rendered: system prompt and chat template applied
    eval_task: Task | None
    warnings: list[str]  # the rewards' dry run's, logged once train.log exists
    device: torch.device
    policy: torch.nn.Module
    tokenizer: Any
    builtin: bool  # the built-in tiny model (a warm start applies to it alone)


def load_inputs(cfg: Config, d: Dist, tasks: tuple[Task, Task | None] | None) -> Loaded:
    """Rewards, prompts, tools and the policy, each checked as it is built (every rank)."""
    reward_fns = build_rewards(cfg)
    task, eval_task = tasks or build_tasks(cfg)  # every row checked: bad data stops here
    warnings = dry_run(cfg, reward_fns, task)  # a reward that cannot take the call stops here
    tool_fns = template_tools(multiturn.build_setup(cfg, None))  # one that does not load stops here
    device = d.device or pick_device(cfg.device)
    seed_everything(cfg.seed)
    policy, tokenizer, builtin = load_policy(cfg.model, cfg.seed, device, cfg.dtype, cfg.gradient_checkpointing,
                                             cfg.lora_r, cfg.lora_alpha, cfg.lora_target_modules)
    # prompts as the model sees them: system prompt and chat template
    task = render(task, tokenizer, cfg.chat_template, cfg.system_prompt, tool_fns)
    eval_task = render(eval_task, tokenizer, cfg.chat_template, cfg.system_prompt, tool_fns) if eval_task else None
    return Loaded(reward_fns=reward_fns, task=task, eval_task=eval_task, warnings=warnings, device=device,
                  policy=policy, tokenizer=tokenizer, builtin=builtin)


def start_weights(cfg: Config, d: Dist, paths: RunPaths, loaded: Loaded, *, forking: bool, source: Path | None,
                  log: logging.Logger, status: StatusFile | NullStatus) -> None:
    """The policy's weights as RL starts, on every rank: a resume's or fork's initial checkpoint (rolled
    back to), else the warm start's, saved as the initial checkpoint (the frozen reference's weights)."""
    if source is not None:  # a fork (rank 0): the parent's initial and step-S checkpoints become the child's own
        fork.link(source, paths.checkpoints)
        log.info("forked from %s at step %d", source.parent.parent.name, cfg.fork_step)
    initial = paths.checkpoints / checkpoint.INITIAL
    if d.broadcast((cfg.resume or forking) and (initial / "meta.json").is_file() if d.writer else None):
        if d.writer:  # the others receive it below
            checkpoint.load(initial, {"model": loaded.policy})
    else:
        if loaded.builtin and cfg.sft_steps:
            warm_start(loaded.policy, loaded.tokenizer, loaded.task.sft_pairs(cfg.seed, 4096, answers_correct=False),
                       cfg.sft_steps, loaded.device, log=log, bar=d.writer, progress=lambda done, total: status.update(
                           phase={"name": "warm_start", "done": done, "total": total}))
            status.update(phase=None)  # Live's "warm start: step i/N" ends here
        if d.writer:
            checkpoint.save(paths.checkpoints, -1, {"model": loaded.policy})
    d.sync_weights(loaded.policy)  # several processes start from rank 0's weights


def build_components(cfg: Config, d: Dist, paths: RunPaths, loaded: Loaded, *, log: logging.Logger,
                     lock: RunLock | None) -> Components:
    """The reference and value models, each model as the strategy trains it, the optimizer and the writer."""
    policy = loaded.policy
    reference = frozen_copy(policy) if cfg.loads_reference else None  # beta 0 alone: none, and its memory saved
    value_model = None
    if cfg.algo == "ppo":
        from grpo_lab.trainer.value import build_value_model  # noqa: PLC0415 - only PPO has a value model

        value_model = build_value_model(cfg, policy, loaded.device)
    policy = wrap(d, policy)  # DDP or FSDP with several processes; as it is on one
    reference = wrap(d, reference, trained=False) if reference is not None else None
    params = list(policy.parameters()) + (list(value_model.parameters()) if value_model is not None else [])
    optimizer = make_optimizer(cfg, params)
    writer = (RunWriter(paths, cfg.logging, cfg.flush_seconds, cfg.compact_every) if d.writer
              else NullWriter(cfg.logging))
    return Components(cfg=cfg, device=loaded.device, policy=policy, tokenizer=loaded.tokenizer, reference=reference,
                      optimizer=optimizer, task=loaded.task, reward_fns=loaded.reward_fns,
                      writer=writer, log=log, builtin_model=loaded.builtin, value_model=value_model,
                      eval_task=loaded.eval_task, lock=lock, dist=d)


def resume_run(cfg: Config, d: Dist, paths: RunPaths, comps: Components, *, forking: bool) -> int:
    """A resume's or fork's newest checkpoint restored on every rank, the tables cut back to it; the
    first step to train."""
    if d.writer:
        checkpoint.remove_partial(paths.checkpoints)
    done = resume_latest(d, paths.checkpoints, models=comps.models(), optimizer=comps.optimizer)
    if not done:
        seed_everything(cfg.seed)
    comps.writer.truncate_after(done)
    if forking:
        fork.retune(comps.optimizer, lr=cfg.lr, weight_decay=cfg.weight_decay)
    else:
        comps.log.info("resuming %s after step %d", cfg.name, done)
    return done + 1


def step_function(algo: str) -> Callable[[Components, int], StepResult]:
    """The algorithm's step: grpo.grpo_step or ppo.ppo_step (imported here: they load torch's models)."""
    if algo == "ppo":
        from grpo_lab.trainer.ppo import ppo_step  # noqa: PLC0415

        return ppo_step
    from grpo_lab.trainer.grpo import grpo_step  # noqa: PLC0415

    return grpo_step


@dataclass
class Progress:
    """Where the step loop is, for the per-step records, the end of the run and a failure's report."""

    step: int  # the step under way; once the loop ends, the last step done
    done: int  # the last step recorded: a failure reports it (one may strike after a step's record, in its
    # closing collective, while `step` still names that step)
    start: float  # time.time() as the loop was about to begin: train_seconds and wall_s count from it
    doctor: Doctor
    findings: dict[str, int]  # per severity, since the run began (a resumed run keeps its count)
    halt: Finding | None = None  # a doctor finding at or above --stop-on (found by rank 0)
    stopping: bool = False  # agreed by every process: a stop signal seen by any of them
    halted: bool = False  # agreed by every process: a halt seen by any of them
    scored: outcome.Scored = field(default_factory=outcome.Scored)  # a run that never scored ends failed
    trends: Trends = field(default_factory=Trends)  # the reward-hacking lens's series (restarts on resume)


def train(cfg: Config, tasks: tuple[Task, Task | None] | None = None) -> int:
    """Run to the end; returns the process exit code (grpo_lab/trainer/outcome.py: 0 finished or stopped by
    a signal, 1 failed or never scored, 3 stopped by the run doctor). `tasks`: as preflight built them."""
    step_fn = step_function(cfg.algo)
    stop = StopRequested()  # before set-up: a stop during the warm start still ends as "stopped"
    d, comps, paths, status, first_step = set_up(cfg, tasks, stop)
    comps.stop_requested = lambda: bool(stop)  # a stop during sampling ends a reward's wait for ratings too
    log = comps.log
    run = begin(comps, status, first_step)
    peers = watch_peers(d, partial(peer_failed, log, comps.writer, status, run))
    failed = False
    try:
        run_steps(comps, paths, status, run, stop, step_fn, first_step)
        return finish(comps, paths, status, run, stop)
    except Exception as exc:  # noqa: BLE001 - any failure must reach status.json, then the caller
        failed = True
        peers.set()
        return record_failure(comps, paths, status, run, exc)
    finally:
        peers.set()
        trackers.end_reporting(comps.writer)  # status.json is final, so a slow tracker holds nothing; a failure too
        stop.restore()
        close_log(log)
        if d.writer:
            free_reserve(paths)  # only a trainer writing the run needs it; a resume sets it aside again
        if comps.lock is not None:
            comps.lock.release()  # the process may go on (train() called from Python): free the run
        if not failed:  # after a failure the group may be broken: the process just ends
            # the models go before the group: a DDP reducer freed after it ends the group itself, holding
            # the GIL while it waits for a gloo thread that needs the GIL (a resume hung so, once in a suite).
            # Nothing else holds the components: Progress, the peers' watch and the step loop's frames don't.
            del comps
            d.close()


# --- set-up: the processes' group, the run directory, the components ---------------------------------


def set_up(cfg: Config, tasks: tuple[Task, Task | None] | None, stop: StopRequested
           ) -> tuple[Dist, Components, RunPaths, StatusFile, int]:
    """The processes' group joined and `prepare` done: (group, components, paths, status, first step).
    A refusal or failure here restores the signal handlers before it reaches the caller."""
    d = Dist()
    try:
        d = launch(cfg)  # joins the launcher's processes (torchrun, accelerate launch); one process: nothing
        comps, paths, status, first_step = prepare(cfg, d, tasks)
    except ConfigError:  # every process refused together: the group is intact
        stop.restore()
        d.close()
        raise
    except BaseException:
        stop.restore()
        raise
    if not gc.isenabled():  # the command line set up without collections (__main__): keep its objects out of them
        gc.freeze()
        gc.enable()
    return d, comps, paths, status, first_step


def begin(comps: Components, status: StatusFile, first_step: int) -> Progress:
    """status.json says "running" (with what trains where), and the loop's state starts."""
    cfg, d = comps.cfg, comps.dist
    start = time.time()
    trained = sum(p.numel() for m in comps.models().values() for p in m.parameters() if p.requires_grad)
    devices = d.gather_object(str(comps.device))
    status.update(state="running", step=first_step - 1, pid=os.getpid(), trained_params=trained,
                  device=str(comps.device), devices=devices, world_size=d.world_size, strategy=d.strategy)
    doctor = Doctor(lr=cfg.lr, max_grad_norm=cfg.max_grad_norm, pretrained=not comps.builtin_model,
                    vocab_size=len(comps.tokenizer), trained_params=trained)
    return Progress(step=first_step - 1, done=first_step - 1, start=start, doctor=doctor,
                    findings=dict(status.data.get("findings") or {}))


def peer_failed(log: logging.Logger, writer: RunWriter | NullWriter, status: StatusFile, run: Progress,
                report: str) -> None:
    """Rank 0 stuck in a collective with a failed process (NCCL; distributed.watch_peers calls it from
    its thread): the completed steps' rows and a failed status, then the process ends."""
    log.error("failed at step %d: %s", run.step, report)
    try:
        writer.flush()  # the completed steps' rows: the main thread is blocked, not writing
    finally:
        status.update(state="failed", step=run.done, error=report)
        os._exit(1)


# --- the step loop ---------------------------------------------------------------------------------


def run_steps(comps: Components, paths: RunPaths, status: StatusFile, run: Progress, stop: StopRequested,
              step_fn: Callable[[Components, int], StepResult], first_step: int) -> None:
    """Steps first_step..max_steps, each recorded and, every checkpoint_every, checkpointed; the loop ends
    early on a stop signal or a doctor's halt (`run.stopping`, `run.halted`), after the same step on
    every process."""
    cfg, d = comps.cfg, comps.dist
    bar = tqdm(total=cfg.max_steps, initial=run.step, desc=cfg.name, mininterval=1.0, dynamic_ncols=True,
               disable=not d.writer)
    for step in range(first_step, cfg.max_steps + 1):
        run.step = step
        run.stopping, = d.any(stop)
        if run.stopping:  # asked to stop before this step began (e.g. during the warm start)
            run.step = step - 1
            break
        result = one_step(comps, step_fn, step)
        record_step(comps, status, run, result, first=step == first_step)
        metrics = result.metrics
        bar.update(1)
        bar.set_postfix(reward=f"{metrics['reward/mean']:.3f}", kl=f"{metrics.get('kl/mean', math.nan):.4f}",
                        refresh=False)
        if step % cfg.checkpoint_every == 0 and step < cfg.max_steps:
            comps.writer.flush()  # the rows up to the checkpoint: a resume truncates to it
            save_checkpoint(d, paths.checkpoints, step, models=comps.models(), optimizer=comps.optimizer,
                            keep=checkpoint.Retention.of(cfg))
        run.stopping, run.halted = d.any(stop, run.halt)  # every process ends after the same step
        if run.stopping or run.halted:
            break
    bar.close()


def one_step(comps: Components, step_fn: Callable[[Components, int], StepResult], step: int) -> StepResult:
    """One training step's result: its scalars (rank 0: every process's figures combined), the held-out
    evaluation's when due, and where the step's time went; the rewards' failures (the evaluation's
    too) and a skipped update's reason, for the doctor."""
    cfg, d = comps.cfg, comps.dist
    d.seed_step(cfg.seed, step)
    result = step_fn(comps, step)
    metrics, notes = combine_across_ranks(d, result.metrics), result.reward_notes
    if comps.eval_task is not None and eval_due(step, cfg.eval_every, cfg.max_steps):
        evaluated, eval_notes = evaluate(comps, step)
        metrics.update(evaluated)
        notes = first_notes(notes, eval_notes)
    metrics.update(comps.timer.scalars())  # where the step went; record_step's flush counts in the next
    return StepResult(metrics=metrics, reward_notes=notes, skipped_update=result.skipped_update)


# --- per step: the scalars row, the run doctor, status.json ---------------------------------------------


def record_step(comps: Components, status: StatusFile, run: Progress, result: StepResult, *, first: bool) -> None:
    """The step's scalars row, the doctor's findings on it (events; a halt when one reaches --stop-on), the
    writer's timed flush and status.json's progress. The lens's figures are added to `result.metrics`."""
    step, log, writer, metrics = run.step, comps.log, comps.writer, result.metrics
    if first and (unknown := sorted(k for k in metrics if registered_name(k) is None)):
        # the registry names and explains every column (docs, Live panels): a new one goes there first
        log.warning("scalars not in grpo_lab/rundir/metrics.py, written undocumented: %s", ", ".join(unknown))
    metrics.update(run.trends.figures(metrics))  # the reward-hacking lens's figures over the run (trainer/lens.py)
    writer.log("scalars", {"step": [step], "time": [time.time()], "wall_s": [time.time() - run.start],
                           **{k: [float(v)] for k, v in metrics.items()}})
    found = (run.doctor.check(step, metrics, reward_notes=result.reward_notes, skipped=result.skipped_update)
             if comps.dist.writer else ())
    for finding in found:  # rank 0 has the global figures
        writer.log("events", finding.row())
        log.warning("doctor, step %d: %s (%s). Suggestion: %s", step, finding.message, finding.severity,
                    finding.suggestion)
        run.findings[finding.severity] = run.findings.get(finding.severity, 0) + 1
        if run.halt is None and stops(finding, comps.cfg.stop_on):
            run.halt = finding
    with comps.timer.phase("log"):
        writer.maybe_flush()
    status.update(step=step, peak_memory_mb=round(peak_memory_mb(comps.device), 1),
                  train_seconds=round(time.time() - run.start, 3), findings=run.findings)
    run.done = step
    run.scored.add(metrics)


# --- the end: finished, stopped (a signal, the doctor) or failed ---------------------------------------


def finish(comps: Components, paths: RunPaths, status: StatusFile, run: Progress, stop: StopRequested) -> int:
    """The end of a run that did not fail: the last rows written, the last checkpoint (none after the
    doctor's halt) and the final status. Returns the exit code."""
    cfg, log, step = comps.cfg, comps.log, run.step
    comps.writer.close()
    if run.halted:  # keep the checkpoint from before the damage: the weights of this step are suspect
        if run.halt is not None:
            reason = f"doctor ({run.halt.kind}, {run.halt.severity}) at step {run.halt.step}: {run.halt.message}"
            status.update(state="stopped", step=step, stop_reason=reason,
                          train_seconds=round(time.time() - run.start, 3))
            log.error("%s", outcome.doctor_stop_line(step, cfg.stop_on, reason))  # the last line, for scripts
        return outcome.DOCTOR_STOPPED
    save_checkpoint(comps.dist, paths.checkpoints, step, models=comps.models(), optimizer=comps.optimizer,
                    keep=checkpoint.Retention.of(cfg))
    never = None if run.stopping else run.scored.never()  # --stop-on none: trained on, yet nothing ever scored
    state = "stopped" if run.stopping else "failed" if never else "finished"
    status.update(state=state, step=step, train_seconds=round(time.time() - run.start, 3),
                  **({"error": never} if never else {}))
    if never:
        log.error("failed at step %d: %s", step, never)
        return outcome.FAILED
    log.info("%s at step %d%s", state, step, f" (signal {stop.signal})" if stop else "")
    return outcome.FINISHED


def record_failure(comps: Components, paths: RunPaths, status: StatusFile, run: Progress, exc: Exception) -> int:
    """A failure during the steps, in train.log and status.json (rank 0; another rank reports it to rank 0),
    with the rows written so far. Called inside the `except`, for the traceback. Returns the exit code, 1."""
    d, log, step = comps.dist, comps.log, run.step
    error, full = f"{type(exc).__name__}: {exc}", False
    if d.writer:  # first: on a full disk, the reserve it frees is where the log and status go
        error, full = disk_note(paths, exc, error)
    log.error("failed at step %d:\n%s", step, traceback.format_exc())
    if not d.writer:  # rank 0 records it; the others' collectives with this process now fail
        d.report_failure(error)
        return 1
    if full:  # rows would take the room status.json needs
        log.error("the disk is full: the rows of steps since the last flush are not written (--resume "
                  "runs every step after the last checkpoint again)")
    else:
        try:
            comps.writer.flush()
        except Exception:  # noqa: BLE001 - the original error is the one to report
            log.error("could not flush logs:\n%s", traceback.format_exc())
    if d.active:  # the process that failed first (another rank's crash breaks rank 0's collectives)
        error = d.failure(error)
    if run.doctor.last_critical and not full:  # the likely cause, found a step or more earlier
        f = run.doctor.last_critical
        error += f" (after the run doctor's finding at step {f.step}: {f.message}; {f.suggestion})"
    status.update(state="failed", step=run.done, error=error)
    return 1
