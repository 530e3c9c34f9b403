"""TRL's names for metrics and options, mapped to ours (docs/run-directory.md) where they mean the same.

One registry: the live callback (grpo_lab/rundir/trl.py), the importer, docs/trl-and-verl.md's table and
the tests all read these dicts. A TRL metric with no entry here is kept as `trl/<its name>`; a
name TRL itself never logs is a reward's `log_metric` figure, `rewards/log/<name>` as here.
"""

from __future__ import annotations

from typing import Any

from grpo_lab.objective.options import LOSS_AGGREGATIONS, STD_MODES

PREFIX = "trl/"

# TRL metric -> ours. Where TRL's definition differs in a detail, the comment says how.
METRICS = {
    "reward": "reward/mean",
    "reward_std": "reward/std",  # TRL: N-1 std over the batch; ours 1/N
    "frac_reward_zero_std": "groups/frac_zero_std",
    "kl": "kl/mean",  # k3 to the reference, token mean; TRL logs it only when beta > 0
    "entropy": "entropy/mean",  # TRL: of the policy being updated (= the sampling policy on pass 1)
    "clip_ratio/low_mean": "clip/low",
    "clip_ratio/high_mean": "clip/high",
    "clip_ratio/region_mean": "clip/total",
    "completions/mean_length": "completion/length_mean",
    "completions/max_length": "completion/length_max",
    "completions/clipped_ratio": "completion/truncated_frac",
    "loss": "loss/total",
    "grad_norm": "grad/norm",
    "learning_rate": "lr",
    "step_time": "time/step_s",  # TRL: generation + forward/backward of the step, not the optimizer step
    "tools/call_frequency": "tools/calls_per_rollout",  # runs with tools: calls per completion
    "tools/failure_frequency": "tools/error_frac",  # failed calls / calls, 0 without calls
    # with vLLM's importance-sampling correction: |log pi_old - log pi_vllm|, and the weights it applied
    "sampling/sampling_logp_difference/mean": "mismatch/logp_diff_mean",
    "sampling/sampling_logp_difference/max": "mismatch/logp_diff_max",
    "sampling/importance_sampling_ratio/min": "mismatch/weight_min",  # TRL: after its truncation or mask
    "sampling/importance_sampling_ratio/mean": "mismatch/weight_mean",
    "sampling/importance_sampling_ratio/max": "mismatch/weight_max",
}
# rewards/<fn>/mean and rewards/<fn>/std have the same name in TRL and here (TRL's std: N-1).
SAME_NAME_PATTERN = ("rewards/", ("/mean", "/std"))

# What TRL 1.16's GRPOTrainer and the transformers Trainer log themselves (grpo_trainer.py's
# `_metrics[mode][...]`, Trainer.log). Any other name in a log record came from a reward's
# `log_metric(name, value)` (TRL logs it under the bare name): ours is `rewards/log/<name>`.
TRL_OWN = frozenset({
    *METRICS, "num_tokens", "policy_loss", "aux_loss", "entropy_coef", "cispo_clip_ratio",
    "clip_ratio/low_min", "clip_ratio/high_max", "completions/min_length", "completions/mean_terminated_length",
    "completions/min_terminated_length", "completions/max_terminated_length", "epoch", "total_flos",
    "num_input_tokens_seen", "train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss",
})
TRL_OWN_PREFIXES = ("eval_", "test_", "sampling/", "vespo/", "rewards/")
LOGGED = "rewards/log/"

# TRL names a reward by its function's __name__ (trl.trainer.utils.get_callable_name); a factory's
# reward is named after what it returns. Ours is the spec given to --rewards. For Compare.
FACTORY_RESULTS = {
    "trl.rewards:get_cosine_scaled_reward": "cosine_scaled_reward",
    "trl.rewards:get_repetition_penalty_reward": "repetition_penalty_reward",
    "trl.rewards:get_soft_overlong_punishment": "soft_overlong_punishment_reward",
}

# GRPOConfig option -> our config field, value unchanged.
OPTIONS = {
    "num_generations": "group_size",
    "epsilon": "epsilon",
    "epsilon_high": "epsilon_high",
    "beta": "beta",
    "learning_rate": "lr",
    "max_completion_length": "max_new_tokens",
    "temperature": "temperature",
    "num_iterations": "passes",
    "seed": "seed",
    "max_grad_norm": "max_grad_norm",
    "weight_decay": "weight_decay",
}
# GRPOConfig option -> (our field, {TRL value: our value}); a value with no entry maps to nothing.
VALUE_OPTIONS = {
    "scale_rewards": ("std_mode", {"group": "sample", "none": "none", "batch": "batch"}),
    "loss_type": ("loss_aggregation", {"grpo": "sequence", "bnpo": "token", "dapo": "token", "dr_grpo": "constant"}),
}


def differing_metrics(args: Any) -> set[str]:
    """TRL metrics whose meaning departs from ours under these GRPOConfig options: kept as trl/<name>."""
    get = (args.get if isinstance(args, dict) else lambda k, d=None: getattr(args, k, d))
    out: set[str] = set()
    if get("importance_sampling_level", "token") != "token" or get("loss_type", "dapo") in ("cispo", "sapo", "vespo"):
        out |= {"clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"}  # not per-token clipping
    aggregation = get("multi_objective_aggregation", "sum_then_normalize")
    if get("scale_rewards", "group") == "batch" or aggregation != "sum_then_normalize":
        out.add("frac_reward_zero_std")  # the std checked is the batch's, not each group's
    return out


def metric_name(trl_name: str, differing: frozenset[str] | set[str] = frozenset()) -> str:
    """Our name for one TRL metric (`trl/<name>` when we have no metric of the same meaning; a
    reward's log_metric figure, a name TRL never logs itself, as `rewards/log/<name>`).

    >>> metric_name("clip_ratio/region_mean"), metric_name("rewards/correct/mean"), metric_name("num_tokens")
    ('clip/total', 'rewards/correct/mean', 'trl/num_tokens')
    >>> metric_name("judge_latency_s")
    'rewards/log/judge_latency_s'
    """
    head, tails = SAME_NAME_PATTERN
    if trl_name.startswith(head) and trl_name.endswith(tails) and trl_name.count("/") == 2:
        return trl_name
    if trl_name not in TRL_OWN and not trl_name.startswith(TRL_OWN_PREFIXES):
        return LOGGED + trl_name
    ours = METRICS.get(trl_name)
    return PREFIX + trl_name if ours is None or trl_name in differing else ours


def reward_function_name(name: str) -> str:
    """The name TRL logs a reward under, for one of ours: a `module:function` spec by its function's
    name (a factory of TRL's by the name of the reward it returns); a registered name as it is.

    >>> [reward_function_name(n) for n in ("trl.rewards:get_cosine_scaled_reward", "pkg.mod:brevity", "format")]
    ['cosine_scaled_reward', 'brevity', 'format']
    """
    return FACTORY_RESULTS.get(name) or name.rsplit(":", 1)[-1].rsplit(".", 1)[-1]


def comparable(column: str) -> str:
    """A scalar's name as Compare matches it across sources: reward metrics by the name TRL logs the
    function under (reward_function_name), a log_metric figure as `rewards/log/<name>`, whoever
    wrote it (an import of an older version wrote `trl/<name>`).

    >>> comparable("rewards/trl.rewards:get_cosine_scaled_reward/mean"), comparable("eval/rewards/m:f/mean")
    ('rewards/cosine_scaled_reward/mean', 'eval/rewards/f/mean')
    >>> comparable("trl/judge_latency_s"), comparable("trl/num_tokens"), comparable("rewards/log/judge_latency_s")
    ('rewards/log/judge_latency_s', 'trl/num_tokens', 'rewards/log/judge_latency_s')
    """
    if column.startswith(PREFIX):
        named = metric_name(column[len(PREFIX):])
        return named if named.startswith(LOGGED) else column
    parts = column.split("/")
    if len(parts) >= 3 and parts[0] in ("rewards", "eval") and parts[-3] == "rewards" and ":" in parts[-2]:
        parts[-2] = reward_function_name(parts[-2])
    return "/".join(parts)


def metrics(logs: dict[str, Any], differing: frozenset[str] | set[str] = frozenset()) -> dict[str, float]:
    """One TRL log record under our names; values that are not numbers (or are None) are left out."""
    out = {}
    for key, value in logs.items():
        if key == "step" or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        out[metric_name(key, differing)] = float(value)
    return out


def options(args: dict[str, Any]) -> dict[str, Any]:
    """Our config fields for the GRPOConfig options that map to ours (others: see `trl_options`)."""
    out = {ours: args[theirs] for theirs, ours in OPTIONS.items() if theirs in args}
    scale = {True: "group", False: "none"}.get(args.get("scale_rewards"), args.get("scale_rewards"))
    known = {"std_mode": STD_MODES, "loss_aggregation": LOSS_AGGREGATIONS}  # what our objective can compute
    for theirs, (ours, values) in VALUE_OPTIONS.items():
        value = values.get(scale if theirs == "scale_rewards" else args.get(theirs))
        if value in known[ours]:
            out[ours] = value
    return out


def trl_options(args: dict[str, Any]) -> dict[str, Any]:
    """Every GRPOConfig option as it was, under `trl/<name>` (JSON values; others as text)."""
    def plain(v: Any) -> Any:
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, (list, tuple)) and all(x is None or isinstance(x, (bool, int, float, str)) for x in v):
            return list(v)
        return str(v)
    return {PREFIX + k: plain(v) for k, v in sorted(args.items())}
