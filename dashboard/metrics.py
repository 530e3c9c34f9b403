"""Which metrics the Live page draws together. Names are those of docs/run-directory.md."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Panel:
    title: str
    metrics: tuple[str, ...]
    help: str
    y_title: str = ""
    ratio: bool = False  # a ratio chart: log y-axis, with the clip bounds drawn as rules
    stacked: bool = False  # parts of a whole (the step's phases): stacked areas, not lines


# trainer/timing.py's phases, as the scalars name them
PHASE_METRICS = tuple(f"time/{phase}_s" for phase in ("generation", "reward", "old_logp", "ref", "update", "log"))


def reward_metrics(columns: list[str]) -> tuple[str, ...]:
    """reward/mean, then each reward function's mean (rewards/<fn>/mean)."""
    per_fn = sorted(c for c in columns if c.startswith("rewards/") and c.endswith("/mean"))
    return ("reward/mean", *per_fn)


def panels(columns: list[str]) -> list[Panel]:
    """The Live page's charts for the columns this run has (PPO adds value/* metrics)."""
    out = [
        Panel("Reward", reward_metrics(columns), "Mean total reward per step, and each reward function's own mean (before weighting).", "reward"),
        Panel("Evaluation (held-out)", ("eval/accuracy", "eval/reward_mean"),
              "Greedy completions on held-out prompts, every eval_every steps (points joined across the steps between).",
              "score"),
        Panel("Advantage spread", ("advantage/std", "advantage/min", "advantage/max"),
              "Group advantages A_i over all completions: how strongly responses are pushed up and down.", "A"),
        Panel("Groups with no signal", ("groups/frac_zero_std",),
              "Share of groups whose rewards were all equal: advantage 0, nothing to learn from.", "fraction"),
        Panel("KL to reference", ("kl/mean", "kl/approx"), "Per-token k3 KL to the frozen reference (nats).", "nats"),
        Panel("Clip fraction", ("clip/low", "clip/high", "clip/total"),
              "Share of tokens whose ratio left [1-eps, 1+eps] in the direction the advantage pushes: zero gradient.", "fraction"),
        Panel("Ratio pi_theta / pi_old", ("ratio/min", "ratio/mean", "ratio/max"),
              "Per-token policy ratio over every optimisation pass; 1 on the first pass.", "ratio", ratio=True),
        Panel("Entropy", ("entropy/mean",), "Entropy of the sampling policy per completion token (nats).", "nats"),
        Panel("Losses", ("loss/policy", "loss/total", "value/loss"), "Minimised losses, mean over updates.", "loss"),
        Panel("Gradient norm", ("grad/norm",), "Gradient L2 norm before clipping.", "norm"),
        Panel("Completion length", ("completion/length_mean", "completion/length_max"), "Completion tokens, EOS included.", "tokens"),
        Panel("Truncated", ("completion/truncated_frac",), "Share of completions with no EOS within max_new_tokens.", "fraction"),
        Panel("Throughput", ("perf/tokens_per_s",), "Completion tokens per second of step time.", "tokens/s"),
        Panel("Where the step goes", PHASE_METRICS, "Seconds per step in each phase, stacked: their sum is the "
              "step's time (logging a step's part files counts in the next step).", "s", stacked=True),
        Panel("Value model (PPO)", ("value/explained_variance", "value/clip_frac", "value/mean", "returns/mean"),
              "PPO's critic: explained variance, value clip fraction, mean value and return.", ""),
    ]
    present = set(columns)
    kept = (dataclasses.replace(p, metrics=tuple(m for m in p.metrics if m in present)) for p in out)
    return [p for p in kept if p.metrics]


def other_metrics(columns: list[str]) -> list[str]:
    """Metric columns no panel shows (lr, reward/std, rewards/<fn>/none_frac, ...)."""
    shown = {m for p in panels(columns) for m in p.metrics}
    return [c for c in columns if c not in shown and c not in ("step", "time", "wall_s")]
