"""A run directory written while TRL's GRPOTrainer trains, so the dashboard opens TRL runs live.

    from grpo_lab.rundir.trl import RunDirCallback
    trainer = GRPOTrainer(model=..., reward_funcs=[...], args=GRPOConfig(...), train_dataset=...,
                          callbacks=[RunDirCallback("runs/my-run")])
    trainer.train()     # then: make dashboard, and open my-run

What it writes (docs/trl-and-verl.md): config.json (TRL's options, those that map to ours under our
names), status.json, tables/scalars (TRL's metrics under our names where they mean the same, the
rest under `trl/`), and tables/samples: every completion with its prompt, rewards per function,
what rewards logged with `log_extra` (`extra/<name>`) and TRL's own advantage, and the reward call
as TRL made it (the prompts and completions it passed, messages for a conversational dataset,
the completion ids and every dataset column: `source_*`, `column/<name>`), so a rescore calls the
rewards exactly as TRL did; in a run with tools (`tools=`, `environment_factory=`), each
completion's turns, tool_calls and tool_errors. TRL exposes no per-token figures, so there are no
ratio histograms and no token detail; config.json and status.json say `source: "trl"` so the
dashboard can tell.

Why it reads the trainer's internals: a TrainerCallback gets the arguments, the state and the
model, never the trainer. TRL keeps the completions of its latest generation batch, with their
rewards and advantages, in `trainer._logs` (the table behind `log_completions`), and replaces
`trainer._buffered_inputs` each time it generates. So the callback finds the trainer once (passed
in, or the Trainer whose __init__ calls `on_init_end`) and, after every micro-step, takes
`_logs` whenever `_buffered_inputs` is a new object: each generation batch exactly once, at the
optimizer step that first trains on it, whatever logging_steps, num_iterations or
steps_per_generation are. The dataset's columns are in no log: the callback wraps the trainer's
`_calculate_rewards(inputs, prompts, completions, completion_ids_list)` and keeps, for the latest
training batch, what it hands the rewards (gathered from every process, as TRL gathers its log).
Only the main process (`state.is_world_process_zero`) writes.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
import time
from pathlib import Path
from typing import Any

from transformers import Trainer, TrainerCallback

from grpo_lab.rundir.importers import names, samples, turns
from grpo_lab.rundir.importers.build import SourceError, open_writer, scalar_row
from grpo_lab.rundir.layout import RunPaths, valid_run_name, write_json_atomic
from grpo_lab.rundir.status import StatusFile

log = logging.getLogger(__name__)


class RunDirCallback(TrainerCallback):
    """Write the run directory `run_dir` while a TRL GRPOTrainer trains.

    trainer: the GRPOTrainer, when the callback is added after construction
    (`trainer.add_callback(RunDirCallback(dir, trainer=trainer))`); found by itself when passed in
    `callbacks=[...]`. overwrite: replace a run already in `run_dir` (otherwise training refuses
    to start, so two runs never mix). flush_seconds: how often buffered rows reach disk.
    """

    def __init__(self, run_dir: str | Path, *, trainer: Any = None, overwrite: bool = False,
                 flush_seconds: float = 2.0):
        self.paths = RunPaths(Path(run_dir))
        if not valid_run_name(self.paths.root.name):
            raise ValueError(f"run_dir {str(run_dir)!r}: its last part is the run's name; use 1-100 letters, "
                             "digits, '.', '_', '-' (starting with a letter or digit)")
        self.trainer, self.overwrite, self.flush_seconds = None, overwrite, flush_seconds
        if trainer is not None:
            self._bind(trainer)
        self.writer = self.status = None
        self.started = 0.0
        self.pending: dict[str, float] = {}  # the metrics of `pending_step`, not yet written
        self.pending_step = self.written_step = 0
        self.seen_batch: int | None = None  # id() of the last generation batch taken
        self.groups_at: dict[int, int] = {}  # step -> groups written so far
        self.extra_kinds: dict[str, str] = {}  # log_extra column -> number or text (importers/samples.py)
        self.reward_call: dict[str, list] | None = None  # what the latest training batch's rewards were handed

    # --- finding the trainer -------------------------------------------------------------------

    def on_init_end(self, args, state, control, **kwargs):
        if self.trainer is None:
            trainer = _calling_trainer()
            if trainer is not None:
                self._bind(trainer)

    def _bind(self, trainer: Any) -> None:
        """Keep the trainer, and wrap its train() so that an exception marks the run failed (or
        stopped, on Ctrl-C): no callback event fires when training raises."""
        self.trainer = trainer
        train = trainer.train

        @functools.wraps(train)
        def train_and_report(*args, **kwargs):
            try:
                return train(*args, **kwargs)
            except KeyboardInterrupt:
                self._end("stopped")
                raise
            except BaseException as exc:
                self._end("failed", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
                raise

        trainer.train = train_and_report
        self._keep_reward_calls(trainer)

    def _keep_reward_calls(self, trainer: Any) -> None:
        """Wrap TRL's `_calculate_rewards` to keep the call its rewards get (the module docstring)."""
        calculate = getattr(trainer, "_calculate_rewards", None)
        try:
            signature = inspect.signature(calculate)
            signature.bind(inputs=[], prompts=[], completions=[], completion_ids_list=[])
        except (TypeError, ValueError):
            log.warning("RunDirCallback: this TRL version's _calculate_rewards is not 1.16's; the reward call "
                        "(source_*, column/*) is not kept")
            return

        @functools.wraps(calculate)
        def calculate_and_keep(*args, **kwargs):
            if getattr(trainer.model, "training", False):  # TRL's own test: a training batch, not an evaluation
                call = signature.bind(*args, **kwargs).arguments
                self.reward_call = _reward_call(trainer, call["inputs"], call["prompts"], call["completions"],
                                                call["completion_ids_list"])
            return calculate(*args, **kwargs)

        trainer._calculate_rewards = calculate_and_keep

    # --- training events -----------------------------------------------------------------------

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if not state.is_world_process_zero:
            return
        if self.trainer is None and (trainer := _calling_trainer()) is not None:
            self._bind(trainer)
        resumed = state.global_step > 0
        if self.paths.status.exists() and not resumed and not self.overwrite:
            raise FileExistsError(f"{self.paths.root} holds a run already; pick another folder, or pass "
                                  "RunDirCallback(..., overwrite=True) to replace it")
        self.writer = open_writer(self.paths, self.flush_seconds)
        self.writer.truncate_after(state.global_step)  # a resume runs the later steps again; a fresh run starts empty
        config = self._config(args, state, model)
        write_json_atomic(self.paths.config, config)
        listing = {k: config[k] for k in ("name", "algo", "model", "task", "source")}
        self.status = StatusFile(self.paths.status, **listing, device=str(args.device))
        self.started = time.time()
        self.pending, self.pending_step, self.written_step = {}, 0, state.global_step
        self.status.update(state="running", step=state.global_step, total_steps=state.max_steps)

    def on_substep_end(self, args, state, control, **kwargs):
        if self.writer is not None:
            self._take_samples(state.global_step + 1)  # the optimizer step in progress

    def on_step_end(self, args, state, control, **kwargs):
        if self.writer is None:
            return
        self._take_samples(state.global_step)
        if self.pending_step and self.pending_step < state.global_step:
            self._write_scalars()
        self.status.update(step=state.global_step, train_seconds=time.time() - self.started)
        self.writer.maybe_flush()

    def on_log(self, args, state, control, logs=None, **kwargs):
        """Training, evaluation and end-of-training logs of one step go into one row of scalars;
        it is written now unless an evaluation of this step is still to come."""
        if self.writer is None or not logs or state.global_step <= self.written_step:
            return  # e.g. the end-of-training summary (train_runtime, ...) after the last row
        if self.pending_step != state.global_step:
            self._write_scalars()
            self.pending_step = state.global_step
        self.pending.update(names.metrics(logs, names.differing_metrics(args)))
        if not control.should_evaluate:
            self._write_scalars()

    def on_evaluate(self, args, state, control, **kwargs):
        if self.writer is not None:
            self._write_scalars()

    def on_train_end(self, args, state, control, **kwargs):
        if self.writer is None:
            return
        self._take_samples(state.global_step)
        self._end("finished")

    # --- writing -------------------------------------------------------------------------------

    def _write_scalars(self) -> None:
        if self.pending_step > self.written_step and self.pending:
            now = time.time()
            self.writer.log("scalars", scalar_row(self.pending_step, now, self.started, self.pending))
            self.written_step = self.pending_step
        self.pending = {}
        self.writer.maybe_flush()

    def _take_samples(self, step: int) -> None:
        """The latest generation batch, if it is one not taken yet (see the module docstring)."""
        trainer = self.trainer
        batch = getattr(trainer, "_buffered_inputs", None)
        # Compared by id(): TRL builds the new list before dropping the old one, so two
        # consecutive batches are alive together and never share an id.
        if batch is None or id(batch) == self.seen_batch:
            return
        self.seen_batch = id(batch)
        logs = getattr(trainer, "_logs", None)
        group_size = int(getattr(trainer.args, "num_generations", 0) or 0)
        if not logs or group_size < 1:
            log.warning("RunDirCallback: this TRL version keeps no completions log; tables/samples is not written")
            return
        fn_names = list(getattr(trainer, "reward_func_names", logs["rewards"].keys()))
        n = min(len(logs["prompt"]), len(logs["completion"]), len(logs["advantages"]))
        n -= n % group_size
        tail = lambda values: list(values)[len(values) - n:]  # noqa: E731 - the latest n rows
        per_fn = {fn: tail(logs["rewards"][fn]) for fn in fn_names if fn in logs["rewards"]}
        weights = dict(zip(fn_names, _floats(getattr(trainer, "reward_weights", None)) or [1.0] * len(fn_names)))
        first = self.groups_at.get(step, 0)
        group, sample_idx = samples.blocks(n, group_size, first)
        self.groups_at[step] = first + n // group_size
        # log_extra columns as extra/<name>; a column not logged for every row of the log is left out
        # (its values would not line up with the completions)
        extra = {c: tail(v) for c, v in (logs.get("extra") or {}).items() if len(v) == len(logs["prompt"])}
        cols = samples.columns(
            step=step, group=group, sample_idx=sample_idx,
            prompt=[samples.text(p) for p in tail(logs["prompt"])],
            completion=[samples.text(c) for c in tail(logs["completion"])],
            reward=samples.weighted_total(per_fn, weights), advantage=tail(logs["advantages"]), per_fn=per_fn,
            extra=samples.extra_columns(extra, self.extra_kinds))
        call, self.reward_call = self.reward_call, None
        if call is not None and len(call["prompts"]) >= n:  # the batch's reward call, its latest n rows
            cols.update(samples.reward_call_columns(
                tail(call["prompts"]), tail(call["completions"]), {k: tail(v) for k, v in call["columns"].items()},
                tail(call["completion_ids"])))
        if getattr(trainer, "tools", None):  # tools or environment_factory: completions are conversations
            try:
                cols.update(turns.columns(tail(logs["completion"]), "TRL's completions log"))
            except SourceError as exc:  # never stop the user's training over what the page shows
                log.warning("RunDirCallback: step %d written without turns: %s", step, exc)
        self.writer.log("samples", cols)

    def _end(self, state: str, error: str | None = None) -> None:
        if self.writer is None or self.status is None:
            return
        try:
            self._write_scalars()
            self.writer.close()
        finally:
            self.status.update(state=state, error=error, train_seconds=time.time() - self.started)
            self.writer = None

    def _config(self, args: Any, state: Any, model: Any) -> dict[str, Any]:
        """Our fields (name, algo, model, ...; the options that map to ours), then every TRL option."""
        trl_args = args.to_dict()
        trainer = self.trainer
        fn_names = list(getattr(trainer, "reward_func_names", []))
        weights = _floats(getattr(trainer, "reward_weights", None)) or [1.0] * len(fn_names)
        dataset = getattr(trainer, "train_dataset", None)
        generation_batch = trl_args.get("generation_batch_size") or 0
        return {
            "name": self.paths.root.name, "algo": "grpo", "source": "trl", "advantage_source": "trl",
            "advantage_epsilon": 1e-4,  # TRL divides by std + 1e-4
            "model": str(getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__),
            "task": str(getattr(getattr(dataset, "info", None), "dataset_name", None) or "TRL train_dataset"),
            "max_steps": state.max_steps,
            "prompts_per_step": generation_batch // max(1, int(trl_args.get("num_generations") or 1)),
            "rewards": dict(zip(fn_names, weights)),
            "token_detail_groups": 0,
            **names.options(trl_args),
            "trl_version": _trl_version(),
            **names.trl_options(trl_args),
        }


def _reward_call(trainer: Any, inputs: list[dict], prompts: list, completions: list, completion_ids: list) -> dict:
    """What TRL 1.16's `_calculate_rewards` hands every reward function: `prompts`, `completions`,
    `completion_ids`, and each column of the batch's rows but prompt, completion and completion_ids (its
    rule: the keys of the first row), gathered over the processes in TRL's order (rank 0 first)."""
    keys = [key for key in (inputs[0] if inputs else {}) if key not in ("prompt", "completion", "completion_ids")]
    call = {"prompts": list(prompts), "completions": list(completions),
            "completion_ids": [list(ids) for ids in completion_ids],
            "columns": {key: [row[key] for row in inputs] for key in keys}}
    accelerator = getattr(trainer, "accelerator", None)
    if accelerator is not None and accelerator.num_processes > 1:  # every process calls this: a collective
        from accelerate.utils import gather_object  # noqa: PLC0415

        call = {k: ({c: gather_object(v) for c, v in value.items()} if k == "columns" else gather_object(value))
                for k, value in call.items()}
    return call


def _calling_trainer() -> Any:
    """The transformers Trainer whose method is running further up the stack (None if none is)."""
    frame = sys._getframe(1)
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, Trainer):
            return candidate
        frame = frame.f_back
    return None


def _floats(values: Any) -> list[float] | None:
    if values is None:
        return None
    return [float(v) for v in (values.tolist() if hasattr(values, "tolist") else values)]


def _trl_version() -> str:
    try:
        from importlib.metadata import version
        return version("trl")
    except Exception:  # noqa: BLE001 - the version is only informative
        return "unknown"
