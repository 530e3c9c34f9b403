"""Which metrics the Live page draws together. Names are those of docs/run-directory.md; each
panel's title, description and unit are in dashboard/locales/ (panel.<id>.*, unit.*)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from grpo_lab.dashboard.i18n import t
from grpo_lab.rundir.metrics import reward_logged
from grpo_lab.trainer.timing import PHASES, RANK_PHASES  # plain names: no torch


@dataclass(frozen=True)
class Panel:
    title: str
    metrics: tuple[str, ...]
    help: str
    y_title: str = ""
    ratio: bool = False  # a ratio chart: log y-axis, with the clip bounds drawn as rules
    stacked: bool = False  # parts of a whole (the step's phases): stacked areas, not lines
    section: str = "overview"  # one of SECTIONS: where Live draws it (only "overview" on first paint)


# Live's sections, in page order. "overview" is drawn on every load; each other section sits in a
# closed expander and is drawn only once opened (a dozen charts on first paint took 2-3 s in a browser).
SECTIONS = ("overview", "update", "completions", "speed", "value")


# grpo_lab/trainer/timing.py's phases, as the scalars name them
PHASE_METRICS = tuple(f"time/{phase}_s" for phase in PHASES)
# timing.rank_scalars: the slowest and the mean process, logged only by runs of several processes
RANK_METRICS = tuple(f"time/{phase}_s_{which}" for phase in RANK_PHASES for which in ("max", "mean"))


def reward_metrics(columns: list[str]) -> tuple[str, ...]:
    """reward/mean, then each reward function's mean (rewards/<fn>/mean)."""
    per_fn = sorted(c for c in columns if c.startswith("rewards/") and c.endswith("/mean") and not reward_logged(c))
    return ("reward/mean", *per_fn)


def panels(columns: list[str]) -> list[Panel]:
    """The Live page's charts for the columns this run has (PPO adds value/* metrics; several
    processes add the slowest and mean rank's times)."""
    present = set(columns)
    out = [
        Panel(t("panel.reward.title"), reward_metrics(columns), t("panel.reward.help"), t("unit.reward")),
        # what TRL reward functions logged with log_metric, beside the rewards they explain
        Panel(t("panel.reward_log.title"), tuple(sorted(c for c in columns if reward_logged(c))),
              t("panel.reward_log.help"), ""),
        Panel(t("panel.eval.title"), ("eval/accuracy", "eval/reward_mean"), t("panel.eval.help"), t("unit.score")),
        Panel(t("panel.advantage.title"), ("advantage/std", "advantage/min", "advantage/max"),
              t("panel.advantage.help"), "A", section="update"),
        Panel(t("panel.no_signal.title"), ("groups/frac_zero_std",), t("panel.no_signal.help"), t("unit.fraction"),
              section="update"),
        Panel(t("panel.kl.title"), ("kl/mean", "kl/approx"), t("panel.kl.help"), "nats"),
        Panel(t("panel.clip.title"), ("clip/low", "clip/high", "clip/total"),
              t("panel.clip.help"), t("unit.fraction")),
        Panel(t("panel.ratio.title"), ("ratio/min", "ratio/mean", "ratio/max"),
              t("panel.ratio.help"), t("unit.ratio"), ratio=True, section="update"),
        Panel(t("panel.entropy.title"), ("entropy/mean",), t("panel.entropy.help"), "nats", section="update"),
        Panel(t("panel.losses.title"), ("loss/policy", "loss/total", "value/loss"), t("panel.losses.help"),
              t("unit.loss"), section="update"),
        Panel(t("panel.grad.title"), ("grad/norm",), t("panel.grad.help"), t("unit.norm"), section="update"),
        Panel(t("panel.length.title"), ("completion/length_mean", "completion/length_max"), t("panel.length.help"),
              t("unit.tokens"), section="completions"),
        Panel(t("panel.truncated.title"), ("completion/truncated_frac",), t("panel.truncated.help"),
              t("unit.fraction"), section="completions"),
        Panel(t("panel.throughput.title"), ("perf/tokens_per_s",), t("panel.throughput.help"),
              t("unit.tokens_per_s"), section="speed"),
        # on a CUDA device only (trainer/perf.py); a CPU run has neither column, so neither panel
        Panel(t("panel.mfu.title"), ("perf/mfu",), t("panel.mfu.help"), t("unit.fraction"), section="speed"),
        Panel(t("panel.gpu_memory.title"), ("perf/gpu_memory_gb",), t("panel.gpu_memory.help"), "GB", section="speed"),
        Panel(t("panel.phases.title"), PHASE_METRICS, t("panel.phases.help"), t("unit.seconds"), stacked=True,
              section="speed"),
        # stragglers; built only for a run that has them (one process has no such columns)
        *([Panel(t("panel.ranks.title"), RANK_METRICS, t("panel.ranks.help"), t("unit.seconds"), section="speed")]
          if present & set(RANK_METRICS) else []),
        Panel(t("panel.value.title"), ("value/explained_variance", "value/clip_frac", "value/mean", "returns/mean"),
              t("panel.value.help"), "", section="value"),
    ]
    kept = (dataclasses.replace(p, metrics=tuple(m for m in p.metrics if m in present)) for p in out)
    return [p for p in kept if p.metrics]


def other_metrics(columns: list[str]) -> list[str]:
    """Metric columns no panel shows (lr, reward/std, rewards/<fn>/none_frac, ...)."""
    shown = {m for p in panels(columns) for m in p.metrics}
    return [c for c in columns if c not in shown and c not in ("step", "time", "wall_s")]
