"""Every scalar a run logs, in one registry: tables/scalars' metric names, units and meanings.

The tests check the trainer's columns against it and that the Live panels draw only names it
holds; docs/run-directory.md's metric tables are written from it, between `<!-- metrics:KEY -->` and
`<!-- /metrics -->` (`python -m grpo_lab.rundir.metrics docs/run-directory.md` rewrites them;
a test fails while the doc differs). One row of the doc is one `Metric`: names that share a unit
and a meaning; `<fn>` stands for each reward function's name, `<name>` for each name a reward
logged with `log_metric`.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path


Bounds = tuple[float | None, float | None]  # (lowest, highest) a value can take; None: no bound
# what a unit allows; a metric whose unit says nothing (nats, '') names its own bounds
UNIT_BOUNDS: dict[str, Bounds] = {"fraction": (0.0, 1.0), "fraction of tokens": (0.0, 1.0), "count": (0.0, None),
                                  "tokens": (0.0, None), "s": (0.0, None), "tokens/s": (0.0, None),
                                  "GB": (0.0, None), "ratio": (0.0, None)}


@dataclass(frozen=True)
class Metric:
    names: tuple[str, ...]
    unit: str
    meaning: str
    bounds: Bounds | None = None  # None: the unit's (UNIT_BOUNDS), else unbounded


@dataclass(frozen=True)
class Table:
    """The metrics one kind of run writes: `algos` write them, with at least `processes`
    processes; `eval`: only on the steps with a held-out evaluation."""

    who: str
    algos: tuple[str, ...]
    processes: int
    eval: bool
    rows: tuple[Metric, ...]
    cuda: bool = False  # only on a CUDA device
    tools: bool = False  # only in runs with tools (--tools / --environment): multi-turn rollouts
    sampler: bool = False  # only in runs without tools: the multi-turn loop keeps no sampler log-probs


TABLES: dict[str, Table] = {
    'scalars': Table('every run, each step', algos=("grpo", "ppo"), processes=1, eval=False, rows=(
        Metric(('reward/mean', 'reward/std', 'reward/min', 'reward/max'),
               'reward', "total reward over the step's completions (std over all completions, 1/N); unscored (None) completions left out"),
        Metric(('rewards/<fn>/mean', 'rewards/<fn>/std', 'rewards/<fn>/min', 'rewards/<fn>/max'),
               'reward', 'the same for each reward function, before weighting'),
        Metric(('rewards/<fn>/none_frac',),
               'fraction', 'completions this function did not score (None, or it raised)'),
        Metric(('rewards/<fn>/errors',),
               'count', 'completions on which this function raised or returned a bad value'),
        Metric(('rewards/log/<name>',),
               '', "a figure a reward function logged with TRL's `log_metric(name, value)`: the mean of the step's calls (written only by runs whose rewards log it)"),
        Metric(('advantage/mean', 'advantage/std', 'advantage/min', 'advantage/max'),
               'std units', 'group advantages A_i over all completions (zeros included)'),
        Metric(('groups/frac_zero_std',),
               'fraction', 'groups whose scored rewards were all equal (or fewer than 2 scored): advantage 0, no learning signal'),
        Metric(('clip/low',),
               'fraction of tokens', 'A < 0 and ratio < 1 - epsilon (clip active, zero gradient), every pass'),
        Metric(('clip/high',),
               'fraction of tokens', 'A > 0 and ratio > 1 + epsilon_high, every pass'),
        Metric(('clip/total',),
               'fraction of tokens', '`clip/low + clip/high`'),
        Metric(('ratio/mean', 'ratio/min', 'ratio/max'),
               'ratio', 'pi_theta / pi_old per token, every pass'),
        Metric(('kl/mean',),
               'nats', 'per-token k3 KL to the reference, mean over tokens of every pass (absent when beta = 0 without measure_kl: no reference, not measured)',
               bounds=(0.0, None)),  # k3 = e^x - x - 1 >= 0 for every token
        Metric(('entropy/mean',),
               'nats', 'entropy of the sampling policy per completion token', bounds=(0.0, None)),
        Metric(('loss/policy',),
               '', 'minus the clipped surrogate, aggregated per `loss_aggregation`, mean over updates'),
        Metric(('loss/total',),
               '', 'the minimised loss: policy loss + beta * KL - entropy bonus (PPO: policy loss + value_coef * value loss, no KL term)'),
        Metric(('grad/norm',),
               '', 'gradient L2 norm before clipping, mean over updates', bounds=(0.0, None)),
        Metric(('lr',),
               '', 'learning rate'),
        Metric(('completion/length_mean', 'completion/length_max'),
               'tokens', 'completion length, EOS included'),
        Metric(('completion/truncated_frac',),
               'fraction', 'completions with no EOS within `max_new_tokens`'),
        Metric(('completion/truncated_rewarded_frac',),
               'fraction', "completions with no EOS within `max_new_tokens` scored above their group's mean (the update makes those cut-off texts more likely)"),
        Metric(('completion/repetitive_frac',),
               'fraction', 'completions of at least 16 words, fewer than a quarter of them distinct (degenerate text)'),
        Metric(('time/step_s',),
               's', "whole step: sample, score, every pass, the step's table rows"),
        Metric(('time/generation_s',),
               's', 'sampling (the decode loop, trainer/decode.py), every round of dynamic sampling'),
        Metric(('time/reward_s',),
               's', 'the reward functions'),
        Metric(('time/old_logp_s',),
               's', "the no-grad forward for pi_old (PPO: and V_old); 0 with `passes 1` and `minibatches 1`, where GRPO takes pi_old from the update's own forward"),
        Metric(('time/ref_s',),
               's', "the reference model's forward (0 when beta = 0 without measure_kl: no reference)"),
        Metric(('time/update_s',),
               's', 'forward, backward and optimizer step of every pass and minibatch'),
        Metric(('time/log_s',),
               's', "building the step's table rows, plus writing part files after the previous step's row"),
        Metric(('perf/tokens_per_s',),
               'tokens/s', 'completion tokens of the step / `time/step_s`'),
        Metric(('perf/generation_tokens_per_s',),
               'tokens/s', 'completion tokens sampled / `time/generation_s`'),
        Metric(('perf/update_tokens_per_s',),
               'tokens/s', 'completion tokens through forward and backward, every pass / `time/update_s`'),
    )),
    'sampler': Table('runs whose rollouts carry the sampler\'s log-probs (every run without tools)', algos=("grpo", "ppo"),
                     processes=1, eval=False, sampler=True, rows=(
        Metric(('mismatch/logp_diff_mean', 'mismatch/logp_diff_max'),
               'nats', "abs(log pi_old - log pi_sampler) per completion token, mean and max: the trainer's forward against the log-prob the sampler drew the token with (TRL's `sampling/sampling_logp_difference`)",
               bounds=(0.0, None)),
        Metric(('mismatch/kl',),
               'nats', 'k3 estimate of KL(pi_sampler ‖ pi_old) per token, `w - 1 - log w` with w = pi_old / pi_sampler (the tokens are the sampler\'s draws)',
               bounds=(0.0, None)),
        Metric(('mismatch/ratio_mean', 'mismatch/ratio_min', 'mismatch/ratio_max'),
               'ratio', 'w = pi_old / pi_sampler per token: the importance weight that puts a token back on pi_old (1: they agree)'),
        Metric(('mismatch/out_frac',),
               'fraction of tokens', 'tokens whose w leaves [0.9, 1.1]'),
        Metric(('mismatch/weight_mean', 'mismatch/weight_min', 'mismatch/weight_max'),
               'ratio', "the weight `mismatch_correction` puts on each token's policy term (w clipped, or 0 outside the caps; sequence modes: the completion's); 1 without a correction (TRL's `sampling/importance_sampling_ratio`)"),
        Metric(('mismatch/masked_frac',),
               'fraction of tokens', 'tokens a `*_mask` correction left out of the loss (weight 0)'),
    )),
    'several': Table('runs of several processes (world_size > 1)', algos=("grpo",), processes=2, eval=False, rows=(
        Metric(('time/generation_s_max', 'time/generation_s_mean'),
               's', '`time/generation_s` of the slowest process, and its mean over processes'),
        Metric(('time/update_s_max', 'time/update_s_mean'),
               's', '`time/update_s` of the slowest process, and its mean over processes'),
    )),
    'gpu': Table('runs on a CUDA device', algos=("grpo", "ppo"), processes=1, eval=False, cuda=True, rows=(
        Metric(('perf/mfu',),
               'fraction', "model FLOPs utilisation: (2 N x tokens sampled + 6 N x tokens trained, every pass) / the seconds from the previous step's row to this one / the device's peak (N: the policy's parameters; the reference and pi_old forwards are left out, so it is a lower bound; peak from `GRPO_LAB_PEAK_TFLOPS` or the device's dense bf16 figure, NaN when unknown)"),
        Metric(('perf/gpu_memory_gb',),
               'GB', "peak CUDA memory allocated by this process during the step (torch.cuda.max_memory_allocated)"),
    )),
    'tools': Table('runs with tools (tools or environment set)', algos=("grpo", "ppo"), processes=1, eval=False,
                   tools=True, rows=(
        Metric(('tools/calls_per_rollout',),
               'count', "tool calls run per completion, mean over the step's completions (calls past `max_tool_calls` stay text and are not counted)"),
        Metric(('tools/error_frac',),
               'fraction', 'tool calls that gave the model an error text (the tool raised, timed out, wrote too much, or the call was malformed or named no tool); 0 when no call was made'),
        Metric(('tools/turns_per_rollout',),
               'count', "model turns per completion (a turn ends at a tool call, an EOS or the token budget), mean over the step's completions"),
        Metric(('time/tools_s',),
               's', 'seconds the tool calls of the step ran (part of `time/generation_s`: tools run inside the sampling loop)'),
    )),
    'grpo': Table('every GRPO run (neutral values when the variant is off)', algos=("grpo",), processes=1, eval=False, rows=(
        Metric(('groups/kept',),
               'count', 'groups trained on this step: `prompts_per_step`, or fewer when dynamic sampling hit its bound'),
        Metric(('groups/dropped',),
               'count', 'groups dynamic sampling left out because their rewards were all equal (0 without it)'),
        Metric(('groups/sampling_rounds',),
               'count', "rounds of sampling this step: 1, plus dynamic sampling's extra rounds (at most 1 + `dynamic_sampling_rounds`)"),
        Metric(('loss/entropy_bonus',),
               'nats', "`entropy_coef` x the policy's entropy, aggregated as the loss, mean over updates (0 without a bonus); `loss/total` subtracts it"),
    )),
    'eval': Table('steps with a held-out evaluation (eval_every > 0); null on the others', algos=("grpo", "ppo"), processes=1, eval=True, rows=(
        Metric(('eval/reward_mean',),
               'reward', "mean total reward (the run's reward functions and weights) over the held-out prompts; unscored ones left out"),
        Metric(('eval/accuracy',),
               'fraction', "share of held-out prompts whose final answer matches the `answer` column (the `correctness` verifier, with the run's parameters when it is one of the run's rewards); NaN when the held-out rows have no `answer`"),
        Metric(('eval/rewards/<fn>/mean',),
               'reward', "each reward function's own mean, before weighting"),
        Metric(('eval/completion/length_mean',),
               'tokens', 'greedy completion length, EOS included'),
        Metric(('eval/completion/truncated_frac',),
               'fraction', 'greedy completions with no EOS within `max_new_tokens`'),
        Metric(('eval/prompts',),
               'count', 'held-out prompts evaluated'),
        Metric(('eval/time_s',),
               's', "the evaluation's wall time (not included in `time/step_s`)"),
    )),
    'eval_tools': Table('steps with a held-out evaluation in runs with tools', algos=("grpo", "ppo"), processes=1,
                        eval=True, tools=True, rows=(
        Metric(('eval/tools/calls_per_rollout',),
               'count', 'tool calls run per greedy held-out completion, mean (the evaluation samples with the run\'s tools)'),
    )),
    'ppo': Table('every PPO run', algos=("ppo",), processes=1, eval=False, rows=(
        Metric(('value/loss',),
               'reward²', 'clipped value loss `0.5 * max((V - R)^2, (V_old + clip(V - V_old, ±value_clip) - R)^2)`, mean over tokens, mean over updates'),
        Metric(('value/clip_frac',),
               'fraction of tokens', 'tokens where the clipped term was the larger (the value update was held back), mean over updates'),
        Metric(('value/explained_variance',),
               '', "`1 - Var(R - V_old) / Var(R)` over the step's tokens, with the values predicted before the update: 1 perfect, 0 no better than a constant, < 0 worse; NaN when every return is equal"),
        Metric(('value/mean',),
               'reward', 'mean V_old over tokens'),
        Metric(('value/grad_norm',),
               '', "the value model's gradient norm before clipping, mean over updates"),
        Metric(('returns/mean',),
               'reward', 'mean return R_t over tokens (the value target)'),
        Metric(('advantage/raw_mean',),
               'reward', 'mean GAE advantage before whitening (near 0 once the value model is calibrated)'),
        Metric(('kl/approx',),
               'nats', "approximate KL(pi_old ‖ pi_theta), mean over tokens of `(ratio - 1) - log ratio`, mean over updates: how far this step's updates moved the policy"),
        Metric(('kl/folded',),
               'nats', 'mean over tokens of `KL_t`, the per-token KL folded into the rewards (`kl_estimator`)'),
        Metric(('kl/penalty',),
               'reward', "mean over responses of `beta * sum_t KL_t`: what the KL penalty took off a response's reward"),
    )),
}


# The reward-hacking lens (rundir/honesty.py, trainer/lens.py): every run writes these, NaN where a figure
# does not apply; the run doctor reads them (docs/reward-hacking.md).
TABLES.update({
    'honesty': Table('every run, each step: is the reward honest?', algos=("grpo", "ppo"), processes=1, eval=False, rows=(
        Metric(('honesty/<fn>/reward_share',),
               'fraction', "this reward's share of the step's total: abs(weight x mean) over the sum of every reward's"),
        Metric(('honesty/<fn>/sign_share',),
               'fraction', "completions whose advantage sign this reward decides: of the rewards pulling a completion's total away from its group's mean the way it goes, the one pulling hardest (NaN: every group without a spread)"),
        Metric(('honesty/length_corr',),
               '', 'Pearson correlation of reward and completion length within groups (both centred on their group mean): near 1, longer answers are paid more (NaN: no spread)',
               bounds=(-1.0, 1.0)),
        Metric(('honesty/length_corr_trend',),
               '', '`honesty/length_corr` averaged over the last 10 steps: its drift over the run', bounds=(-1.0, 1.0)),
        Metric(('honesty/strict_fail_frac',),
               'fraction', "the top completions of groups with a spread (at most 32 a step) that fail the strict check, the answer alone in its exact format (grpo_lab/rewards/strict.py): a high reward the answer does not earn (NaN: prompts without a reference answer)"),
        Metric(('honesty/strict_checked',),
               'count', 'completions the strict check read this step'),
        Metric(('honesty/groups_all_solved', 'honesty/groups_none_solved'),
               'fraction', 'groups whose every completion the verifier (`correctness` or `code_tests`) scored right, and none right (NaN: the run has no verifier)'),
        Metric(('honesty/group_spread',),
               'reward', 'the reward\'s std within each group, mean over groups: what the advantages divide out'),
        Metric(('honesty/group_spread_ratio',),
               'ratio', '`honesty/group_spread` over the last 10 steps against the first 10: below 0.2 the groups stopped differing (NaN before step 20)'),
    )),
    'honesty_eval': Table('steps with a held-out evaluation: the training reward against it', algos=("grpo", "ppo"),
                          processes=1, eval=True, rows=(
        Metric(('honesty/reward_gain',),
               'std units', "`reward/mean` over the last 10 steps minus over the first 10, in units of the first 10 steps' `reward/std` (NaN before step 20)"),
        Metric(('honesty/eval_accuracy_gain',),
               '', '`eval/accuracy` now minus at the first evaluation: flat or falling while `honesty/reward_gain` rises is the reward outrunning the answers',
               bounds=(-1.0, 1.0)),
    )),
})

# A step's phases, in the order they run: trainer/timing.py times each into time/<phase>_s (rows above)
PHASES = ("generation", "reward", "old_logp", "ref", "update", "log")
# the phases one process can hold the others up in: time/<phase>_s_max and _mean ('several' above)
RANK_PHASES = ("generation", "update")


@dataclass(frozen=True)
class Panel:
    """One chart of the Live page: the registered names it draws, in order (patterns expand to every
    column of a run they match). Its help is the meaning of each row it draws; its title is in the
    dashboard's locale files (panel.<id>.title)."""

    id: str
    names: tuple[str, ...]
    section: str = "overview"  # where Live puts it (SECTIONS, below)
    ratio: bool = False  # log y-axis, the clip bounds drawn as rules
    stacked: bool = False  # parts of a whole: stacked areas


PANELS: tuple[Panel, ...] = (
    Panel("reward", ("reward/mean", "rewards/<fn>/mean")),
    Panel("reward_log", ("rewards/log/<name>",)),  # beside the rewards they explain
    Panel("eval", ("eval/accuracy", "eval/reward_mean")),
    Panel("advantage", ("advantage/std", "advantage/min", "advantage/max"), section="update"),
    Panel("no_signal", ("groups/frac_zero_std",), section="update"),
    Panel("kl", ("kl/mean", "kl/approx")),
    Panel("clip", ("clip/low", "clip/high", "clip/total")),
    Panel("ratio", ("ratio/min", "ratio/mean", "ratio/max"), section="update", ratio=True),
    Panel("entropy", ("entropy/mean",), section="update"),
    Panel("mismatch", ("mismatch/logp_diff_mean", "mismatch/logp_diff_max", "mismatch/kl"), section="sampler"),
    Panel("mismatch_ratio", ("mismatch/ratio_min", "mismatch/ratio_mean", "mismatch/ratio_max", "mismatch/weight_mean"),
          section="sampler"),
    Panel("mismatch_tails", ("mismatch/out_frac", "mismatch/masked_frac"), section="sampler"),
    Panel("losses", ("loss/policy", "loss/total", "value/loss"), section="update"),
    Panel("grad", ("grad/norm",), section="update"),
    Panel("length", ("completion/length_mean", "completion/length_max"), section="completions"),
    Panel("truncated", ("completion/truncated_frac",), section="completions"),
    Panel("tools", ("tools/calls_per_rollout", "tools/turns_per_rollout"), section="completions"),
    Panel("tool_errors", ("tools/error_frac",), section="completions"),
    Panel("throughput", ("perf/tokens_per_s",), section="speed"),
    Panel("mfu", ("perf/mfu",), section="speed"),
    Panel("gpu_memory", ("perf/gpu_memory_gb",), section="speed"),
    Panel("phases", tuple(f"time/{phase}_s" for phase in PHASES), section="speed", stacked=True),
    Panel("tool_time", ("time/tools_s",), section="speed"),  # inside generation: not one of the stacked phases
    Panel("ranks", tuple(f"time/{phase}_s_{which}" for phase in RANK_PHASES for which in ("max", "mean")),
          section="speed"),
    Panel("value", ("value/explained_variance", "value/clip_frac", "value/mean", "returns/mean"), section="value"),
)

# Live's "Is the reward honest?" section (the reward-hacking lens)
PANELS += (
    Panel("honesty_sign", ("honesty/<fn>/sign_share",), section="honesty"),
    Panel("honesty_share", ("honesty/<fn>/reward_share",), section="honesty"),
    Panel("honesty_length", ("honesty/length_corr", "honesty/length_corr_trend"), section="honesty"),
    Panel("honesty_strict", ("honesty/strict_fail_frac",), section="honesty"),
    Panel("honesty_eval", ("honesty/reward_gain", "honesty/eval_accuracy_gain"), section="honesty"),
    Panel("honesty_solved", ("honesty/groups_all_solved", "honesty/groups_none_solved"), section="honesty"),
    Panel("honesty_spread", ("honesty/group_spread", "honesty/group_spread_ratio"), section="honesty"),
)


# Live's sections, in page order: each section's id as its panels first name it. "overview" is drawn on
# every load; each other section sits in a closed expander, drawn once opened (a dozen charts on first
# paint took 2-3 s in a browser), under its title live.section.<id> in the dashboard's locale files.
SECTIONS: tuple[str, ...] = tuple(dict.fromkeys(p.section for p in PANELS))

def _pattern(name: str) -> re.Pattern:
    """A registered name as a regex over columns: <fn> one path part, <name> the rest."""
    return re.compile("".join("([^/]+)" if part == "<fn>" else "(.+)" if part == "<name>" else re.escape(part)
                              for part in re.split(r"(<fn>|<name>)", name)) + r"\Z")


ROWS: dict[str, Metric] = {name: row for table in TABLES.values() for row in table.rows for name in row.names}
# patterns by the length of their fixed start, longest first: rewards/log/x is a logged figure, not
# reward function "log"'s
_PATTERNS = sorted(((n, _pattern(n)) for n in ROWS if "<" in n), key=lambda p: -p[0].index("<"))


def registered_name(column: str) -> str | None:
    """The registered name a scalars column is an instance of (itself, or the pattern it matches); None
    when the registry does not know it."""
    if column in ROWS:
        return column
    return next((name for name, pattern in _PATTERNS if pattern.match(column)), None)


def named(name: str, fn: str | None = None) -> str:
    """A scalars column by its name in this registry, `<fn>` filled in: a name the registry does not hold
    fails here, the first time the trainer writes (or reads) it, not in a reader.

    >>> named("kl/mean"), named("rewards/<fn>/mean", "correctness")
    ('kl/mean', 'rewards/correctness/mean')
    """
    if name not in ROWS:
        raise KeyError(f"{name!r} is not in grpo_lab/rundir/metrics.py: register it there first")
    return name if fn is None else name.replace("<fn>", fn)


def value_bounds(column: str) -> Bounds:
    """The values a scalars column can take, from its registry row: (lowest, highest), None unbounded.

    >>> value_bounds("kl/mean"), value_bounds("clip/total"), value_bounds("reward/mean"), value_bounds("x")
    ((0.0, None), (0.0, 1.0), (None, None), (None, None))
    """
    name = registered_name(column)
    row = ROWS.get(name) if name else None
    if row is None:
        return None, None
    return row.bounds or UNIT_BOUNDS.get(row.unit, (None, None))


def columns_of(name: str, columns: list[str]) -> list[str]:
    """The columns of a run that are `name` (a registered name or pattern), in order (a pattern's sorted)."""
    if "<" not in name:
        return [name] if name in columns else []
    return sorted(c for c in columns if c not in ROWS and registered_name(c) == name)


def _check_panels() -> None:
    unknown = [n for p in PANELS for n in p.names if n not in ROWS]
    if unknown:  # a panel drawing a name the registry does not hold is a bug in this file
        raise ValueError(f"PANELS name unregistered metrics: {unknown}")


_check_panels()


def names(algo: str, rewards: list[str], processes: int = 1, evaluated: bool = False, cuda: bool = False,
          logged: tuple[str, ...] = (), tools: bool = False) -> set[str]:
    """The metric columns a run of `algo` with reward functions `rewards` on `processes` processes
    writes (`evaluated`: with eval/* columns, eval_every > 0; `cuda`: on a CUDA device; `logged`:
    the names its rewards pass to log_metric; `tools`: a run with tools)."""
    out: set[str] = set()
    for table in TABLES.values():
        if (algo in table.algos and processes >= table.processes and (evaluated or not table.eval)
                and (cuda or not table.cuda) and (tools or not table.tools) and not (tools and table.sampler)):
            for name in (n for row in table.rows for n in row.names):
                for pattern, values in (("<fn>", rewards), ("<name>", logged)):
                    if pattern in name:
                        out.update(name.replace(pattern, v) for v in values)
                        break
                else:
                    out.add(name)
    return out


def reward_logged(column: str) -> bool:
    """Whether a scalars column is a reward's log_metric figure (`rewards/log/<name>`)."""
    return column.startswith("rewards/log/")


def _names_cell(names: tuple[str, ...]) -> str:
    """`reward/mean`, `/std`: a name that shares its namespace with the one before it is shortened."""
    cells, prev = [], None
    for name in names:
        space = name.rsplit("/", 1)[0] if "/" in name else None
        cells.append(f"`/{name.rsplit('/', 1)[1]}`" if prev is not None and space == prev else f"`{name}`")
        prev = space
    return ", ".join(cells)


def doc_table(key: str) -> str:
    rows = [f"| {_names_cell(m.names)} |{f' {m.unit} ' if m.unit else ' '}| {m.meaning} |" for m in TABLES[key].rows]
    return "\n".join(["| metric | unit | meaning |", "|---|---|---|", *rows])


BLOCK = re.compile(r"(<!-- metrics:(\w+) -->\n).*?(\n<!-- /metrics -->)", re.S)


def render_doc(text: str) -> str:
    """`text` with every metrics block rewritten from the registry."""
    return BLOCK.sub(lambda m: m.group(1) + doc_table(m.group(2)) + m.group(3), text)


if __name__ == "__main__":
    doc = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/run-directory.md")
    doc.write_text(render_doc(doc.read_text()))
