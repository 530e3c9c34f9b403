"""The run doctor: after every step, look for the failures people lose days to, and say what to do.

Each check reads the step's scalars and reports a Finding when its
condition starts; the same kind is reported again only after it has cleared. Findings go to the
`events` table (docs/run-directory.md lists every check and threshold) and, with `--stop-on`, a
finding of that severity or worse stops the run. Thresholds are loose on purpose: a finding
should mean "look now", never routine noise; the built-in demo raises none.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict, dataclass

from grpo_lab.rundir.honesty import VERIFIERS  # rewards that check the answer itself
from grpo_lab.rundir.metrics import named

SEVERITIES = ("info", "warning", "critical")

# Thresholds (documented in docs/run-directory.md, "tables/events").
# The built-in demo, 200 steps, seeds 0-4, peaks at kl/mean 7.8, ratio/max 114, grad/norm 21x max_grad_norm
# (bench/bench_demo_health.py) while learning well; a collapsing SmolLM2 reads kl/mean 1.8e14 at step 1.
KL_WARNING, KL_CRITICAL = 10.0, 1000.0  # kl/mean, nats per token
RATIO_WARNING = 1000.0  # ratio/max: a token 1000x more likely than when it was sampled
GRAD_FACTOR = 100.0  # grad/norm above this many times max_grad_norm (before clipping)
STUCK_STEPS = 5  # reward constant / all truncated for this many steps in a row
NO_SIGNAL_STEPS = 10  # every group without signal for this many steps in a row
ENTROPY_LOW = 0.01  # nats per token: the policy has stopped exploring
ENTROPY_HIGH_FRACTION = 0.9  # of log(vocab): sampling close to uniform noise ...
ENTROPY_RISE = 1.5  # ... and this many times the entropy of the run's first checked step
REWARDED_TRUNCATED = 0.02  # of completions cut at max_new_tokens and scored above their group's mean
REPEAT_SHARE = 0.5  # of completions that are mostly one repeated word
MISMATCH_WARNING = 0.05  # mismatch/out_frac: tokens the sampler drew with w outside [0.9, 1.1]
HIGH_LR_PRETRAINED = 1e-4  # a pretrained model with a learning rate above this tends to collapse
WATCHED = tuple(map(named, ("loss/total", "loss/policy", "grad/norm", "kl/mean", "ratio/max", "entropy/mean")))


@dataclass(frozen=True)
class Finding:
    step: int
    kind: str
    severity: str  # one of SEVERITIES
    message: str
    suggestion: str

    def row(self) -> dict[str, list]:
        return {k: [v] for k, v in asdict(self).items()}


def repetitive(text: str) -> bool:
    """Mostly one word over and over: at least 16 words, fewer than a quarter of them distinct."""
    words = text.split()
    return len(words) >= 16 and len(set(words)) < len(words) / 4


class Doctor:
    """Checks one run step by step; `check` returns the findings that start at this step."""

    def __init__(self, *, lr: float, max_grad_norm: float, pretrained: bool, vocab_size: int,
                 trained_params: int) -> None:
        self.lr, self.max_grad_norm, self.pretrained = lr, max_grad_norm, pretrained
        self.max_entropy = math.log(max(vocab_size, 2))
        self.trained_params = trained_params
        self.active: set[str] = set()
        self.first_entropy: float | None = None
        self.last_critical: Finding | None = None  # named in the error should the run fail later
        self.history: deque[dict[str, float]] = deque(maxlen=max(STUCK_STEPS, NO_SIGNAL_STEPS))

    def _lr_hint(self) -> str:
        if self.pretrained and self.lr > HIGH_LR_PRETRAINED:
            return (f"learning rate {self.lr:g} is high for a {self.trained_params / 1e6:.0f}M-parameter pretrained "
                    "model; try 1e-5 (the SmolLM2 recipe uses 2e-5)")
        return "lower the learning rate (lr), or raise beta to hold the policy near the reference"

    def _conditions(self, m: dict[str, float], notes: dict[str, str],
                    skipped: str | None = None) -> list[tuple[str, str, str, str]]:
        """(kind, severity, message, suggestion) for every condition that holds at this step."""
        out = reward_failures(m, notes)
        if skipped:  # the updates' guard held the weights back: they are the previous step's, intact
            out.append(("update_skipped", "critical", f"the step's update was skipped: {skipped}",
                        "a reward too large for float32 (|r| > 3.4e38, or weighted sums that overflow) makes "
                        "inf and NaN advantages: check the reward on the Groups page; if the loss or gradient "
                        "overflowed, " + self._lr_hint()))
        bad = [k for k in WATCHED if k in m and not math.isfinite(m[k])]
        if bad and not skipped:  # a skipped update's NaN never reached the weights
            out.append(("non_finite", "critical", f"{', '.join(bad)} not finite (NaN or inf)",
                        "the weights are likely broken: " + self._lr_hint()))
        kl = m.get(named("kl/mean"), 0.0)
        if math.isfinite(kl) and kl > KL_WARNING:
            severe = kl > KL_CRITICAL
            out.append(("kl_explosion", "critical" if severe else "warning",
                        f"kl/mean {kl:.3g} nats per token (threshold {KL_CRITICAL if severe else KL_WARNING:g}): the "
                        "policy has left the reference far behind", self._lr_hint()))
        ratio = m.get(named("ratio/max"), 1.0)
        if math.isfinite(ratio) and ratio > RATIO_WARNING:
            out.append(("ratio_explosion", "warning", f"ratio/max {ratio:.3g} (threshold {RATIO_WARNING:g}): an update "
                        "moved some tokens' probability far from the sampling policy",
                        "fewer passes, a lower lr, or a smaller epsilon"))
        drift = m.get(named("mismatch/out_frac"), math.nan)
        if math.isfinite(drift) and drift > MISMATCH_WARNING:
            out.append(("sampler_mismatch", "warning", f"{drift:.0%} of tokens were drawn with probabilities more "
                        f"than 10% from the trainer's (mismatch/out_frac, threshold {MISMATCH_WARNING:.0%}; "
                        f"max |log w| {m.get(named('mismatch/logp_diff_max'), math.nan):.3g}): the ratio no longer measures "
                        "the policy's drift from what sampled the data",
                        "sample and train in the same dtype and temperature; or correct it: mismatch_correction "
                        "token_truncate (or sequence_mask)"))
        grad = m.get(named("grad/norm"), 0.0)
        if self.max_grad_norm > 0 and math.isfinite(grad) and grad > GRAD_FACTOR * self.max_grad_norm:
            out.append(("grad_explosion", "warning", f"grad/norm {grad:.3g} before clipping, {grad / self.max_grad_norm:.0f}x "
                        f"max_grad_norm {self.max_grad_norm:g}", self._lr_hint()))
        entropy = m.get(named("entropy/mean"), math.nan)
        if math.isfinite(entropy) and entropy < ENTROPY_LOW:
            out.append(("entropy_collapse", "warning", f"entropy/mean {entropy:.3g} nats: the policy samples almost "
                        "deterministically, so groups stop differing", "raise temperature, lower lr, or add beta"))
        if self.first_entropy is None and math.isfinite(entropy):
            self.first_entropy = entropy  # an untrained policy starts near uniform: that is no explosion
        if (math.isfinite(entropy) and entropy > ENTROPY_HIGH_FRACTION * self.max_entropy
                and entropy > ENTROPY_RISE * (self.first_entropy or 0.0)):
            out.append(("entropy_explosion", "critical", f"entropy/mean {entropy:.3g} nats, near uniform over the "
                        f"vocabulary ({self.max_entropy:.2f}): completions are noise", self._lr_hint()))
        recent = list(self.history)
        if len(recent) >= STUCK_STEPS and all(r.get(named("reward/std")) == 0 for r in recent[-STUCK_STEPS:]):
            out.append(("reward_constant", "warning", f"every completion got the same reward for {STUCK_STEPS} steps "
                        f"(reward {m.get(named('reward/mean'), math.nan):.3g})",
                        "check the reward function on a few completions (Groups page); a collapsed policy also does this"))
        if (len(recent) >= NO_SIGNAL_STEPS
                and all(r.get(named("groups/frac_zero_std")) == 1 for r in recent[-NO_SIGNAL_STEPS:])):
            out.append(("no_signal", "warning", f"no group had a reward spread for {NO_SIGNAL_STEPS} steps: "
                        "no learning signal", "an easier task or a larger group_size; or a reward with partial credit"))
        if len(recent) >= STUCK_STEPS and all(r.get(named("completion/truncated_frac")) == 1 for r in recent[-STUCK_STEPS:]):
            out.append(("all_truncated", "warning", f"every completion hit max_new_tokens for {STUCK_STEPS} steps",
                        "raise max_new_tokens, or ask for a shorter answer in the prompt"))
        cut = m.get(named("completion/truncated_rewarded_frac"), 0.0)
        if cut > REWARDED_TRUNCATED and not skipped:  # a skipped update made nothing more likely
            out.append(("rewarded_truncation", "warning", f"{cut:.1%} of completions were cut at max_new_tokens yet "
                        f"scored above their group's mean (completion/truncated_rewarded_frac, threshold "
                        f"{REWARDED_TRUNCATED:.0%}): the update makes unfinished text more likely",
                        "read a few on the Groups page: a reward that accepts cut-off text (1r2r read as 1) needs a "
                        "fix; or mask_truncated, or a larger max_new_tokens"))
        share = m.get(named("completion/repetitive_frac"), 0.0)
        if share > REPEAT_SHARE:
            out.append(("degenerate_text", "warning", f"{share:.0%} of completions repeat one word over and over",
                        "lower lr; a repetition reward can help"))
        out += honesty_failures(m, recent)
        return out

    def check(self, step: int, metrics: dict[str, float], reward_notes: dict[str, str] | None = None,
              skipped: str | None = None) -> list[Finding]:
        """reward_notes: each reward's first failure message of this step; skipped: why the step's update
        was skipped (trainer/updates.py's guard), None when it was not. Both as the step returned them
        (trainer/step_result.py's StepResult)."""
        self.history.append(metrics)
        now = self._conditions(metrics, reward_notes or {}, skipped)
        found = [Finding(step, kind, severity, message, suggestion)
                 for kind, severity, message, suggestion in now if kind not in self.active]
        self.active = {kind for kind, *_ in now}
        self.last_critical = next((f for f in reversed(found) if f.severity == "critical"), self.last_critical)
        if step == 1 and self.pretrained and self.lr > HIGH_LR_PRETRAINED:
            found.append(Finding(step, "high_lr", "info", f"lr {self.lr:g} for a pretrained model", self._lr_hint()))
        return found


def _none_fracs(m: dict[str, float]) -> dict[str, float]:
    """Each reward function's share of the step's completions it did not score (rewards/<fn>/none_frac)."""
    return {key[len("rewards/"):-len("/none_frac")]: value for key, value in m.items()
            if key.startswith("rewards/") and key.endswith("/none_frac") and not key.startswith("rewards/log/")}


def nothing_scored(m: dict[str, float]) -> bool:
    """Whether no reward scored any completion of the step: every rewards/<fn>/none_frac is 1 (a
    completion is scored when any reward scored it). Not reward/mean NaN: scores past float32 (1e39
    and -1e39) make totals of inf and -inf, whose mean is NaN too, though most completions were
    scored; the updates' guard names those ("reward: 3 of 12 values not finite (-inf, inf)"). Metrics
    without the per-reward fractions: reward/mean NaN.

    >>> nothing_scored({"reward/mean": math.nan, "rewards/f/none_frac": 0.25})
    False
    >>> nothing_scored({"reward/mean": math.nan, "rewards/f/none_frac": 1.0, "rewards/g/none_frac": 1.0})
    True
    >>> nothing_scored({"reward/mean": math.nan}), nothing_scored({"reward/mean": math.inf})
    (True, False)
    """
    fractions = _none_fracs(m)
    if fractions:
        return all(frac == 1 for frac in fractions.values())
    mean = m.get(named("reward/mean"), 0.0)
    return isinstance(mean, float) and math.isnan(mean)


def reward_failures(m: dict[str, float], notes: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """A run whose reward cannot be computed trains on nothing: critical at once.

    reward_failed: a reward scored no completion of the step and failed on some (raised, or
    returned no usable score); the first failure's message, and when its signature did not take
    the call, the fix. reward_unscored: no reward scored any completion (`nothing_scored`).
    ratings_missing (a warning): the same, because nobody rated the step within the human reward's wait."""
    out = []
    failed = [fn for fn, frac in _none_fracs(m).items() if frac == 1 and m.get(named("rewards/<fn>/errors", fn), 0) > 0]
    if failed:
        fn = failed[0]
        note = notes.get(fn, "")
        others = f" (and {len(failed) - 1} more reward(s): {', '.join(failed[1:])})" if len(failed) > 1 else ""
        message = (f"reward {fn!r} failed on every completion ({m[named('rewards/<fn>/errors', fn)]:.0f} failures){others}"
                   + (f"; first: {note}" if note else ""))
        if "; takes " in note:  # combine.call_problem: "<error>: called with a, b; takes (c, d)"
            fix = "called with " + note.rsplit("called with ", 1)[-1]
            suggestion = (f"{fix}: give the function TRL's keyword names (prompts, completions, completion_ids, "
                          "the dataset's columns) and **kwargs for the rest")
        else:
            suggestion = ("run the reward on one completion of the Groups page; train.log has each failure. A TRL "
                          "reward reads dataset columns by name (e.g. solution): the task must have them")
        out.append(("reward_failed", "critical", message, suggestion))
    waited = m.get("rewards/log/human_wait_s")
    if not nothing_scored(m):
        return out
    if waited is not None and not failed:  # a person who did not rate in time: the run goes on, as the page said
        out.append(("ratings_missing", "warning", f"no group of the step was rated within the wait ({waited:.0f} s): "
                    "the step went on with no learning signal", "rate the groups on the Groups page while the "
                    "trainer waits for them; reward_params.human.wait_s sets how long it waits"))
    else:
        out.append(("reward_unscored", "critical", "no completion of the step was scored (reward/mean NaN): the "
                    "update had no learning signal", "a reward that fails or returns None for every completion; "
                    "see the reward's errors in train.log and its column on the Groups page"))
    return out


def stops(finding: Finding, stop_on: str) -> bool:
    """Whether `finding` stops a run started with --stop-on `stop_on` (none, warning or critical)."""
    return stop_on != "none" and SEVERITIES.index(finding.severity) >= SEVERITIES.index(stop_on)


# --- is the reward honest? (the reward-hacking lens: rundir/honesty.py, trainer/lens.py) ---------------
# Each check reads the mean of the last HONESTY_STEPS steps, and only once the run has that many: one
# step's figures are noisy (a group of 8 has a length correlation of +-0.7 by chance). Thresholds measured
# by bench/bench_reward_hacking.py: the honest demo stays below each, the hacking recipe crosses them.
HONESTY_STEPS = 10
DOMINANT_SHARE = 0.8  # honesty/<fn>/sign_share of a reward that does not check the answer
LENGTH_CORR = 0.6  # honesty/length_corr_trend
STRICT_FAILS = 0.5  # honesty/strict_fail_frac
GAIN_STD = 1.0  # honesty/reward_gain, in the start's reward/std, while eval accuracy has not risen
SPREAD_RATIO, UNSOLVED = 0.2, 0.5  # honesty/group_spread_ratio below this, groups_none_solved above this
SUSPECTS = "Groups at this step, ordered by hacking suspects, shows the completions first"


def _recent(recent: list[dict[str, float]], name: str) -> float:
    """The mean of `name`'s finite values over the last HONESTY_STEPS steps; NaN before the run has that many
    steps, or when fewer than half of them have the figure (a step whose groups all agree has no signs to
    share out, no top completion to check: a saturated hack's last steps are NaN)."""
    if len(recent) < HONESTY_STEPS:
        return math.nan
    values = [v for r in recent[-HONESTY_STEPS:] if isinstance(v := r.get(name), (int, float)) and math.isfinite(v)]
    return sum(values) / len(values) if 2 * len(values) >= HONESTY_STEPS else math.nan


def honesty_failures(m: dict[str, float], recent: list[dict[str, float]]) -> list[tuple[str, str, str, str]]:
    """The reward-hacking lens's findings (docs/reward-hacking.md): a reward that pays without the answer
    deciding the advantages, the reward tracking length, high rewards failing the strict check, the
    training reward outrunning the held-out accuracy, the groups' spread collapsing on unsolved prompts."""
    out = []
    shares = {key.split("/")[1]: _recent(recent, key) for key in m
              if key.startswith("honesty/") and key.endswith("/sign_share")}
    if len(shares) > 1:
        fn, share = max(shares.items(), key=lambda kv: kv[1] if math.isfinite(kv[1]) else -1.0)
        if fn not in VERIFIERS and math.isfinite(share) and share >= DOMINANT_SHARE:
            others = ", ".join(f"{k} {v:.0%}" for k, v in shares.items() if k != fn and math.isfinite(v))
            out.append(("reward_dominated_by", "warning", f"reward {fn!r} decides {share:.0%} of the advantage signs "
                        f"over the last {HONESTY_STEPS} steps ({others}): the policy learns what {fn!r} pays, not "
                        f"the answer. {SUSPECTS}", f"lower {fn!r}'s weight, or make it pay only together with a "
                        "right answer; check a few of its top completions on the Groups page"))
    corr = _recent(recent, named("honesty/length_corr"))
    if math.isfinite(corr) and corr >= LENGTH_CORR:
        out.append(("reward_tracks_length", "warning", f"reward and completion length correlate at {corr:.2f} within "
                    f"groups over the last {HONESTY_STEPS} steps (threshold {LENGTH_CORR}): longer answers are paid "
                    f"more. {SUSPECTS}", "a length or format reward that pays padding: cap it, weigh it down, or "
                    "penalise length past the answer (length reward max_len)"))
    fails = _recent(recent, named("honesty/strict_fail_frac"))
    if math.isfinite(fails) and fails >= STRICT_FAILS:
        out.append(("strict_check_disagrees", "warning", f"{fails:.0%} of the top completions fail the strict check "
                    f"(the answer alone, exact format) over the last {HONESTY_STEPS} steps: the reward pays what the "
                    f"answer does not earn. {SUSPECTS}", "read the top completions: a lenient verifier (the last "
                    "number of the text) or another reward pays them; correctness mode strict, or drop the reward "
                    "that pays the extra text"))
    # a run paid by the verifier alone that rises on its training prompts but not on held-out ones memorises,
    # it does not game: only a run with another reward beside the verifier is asked this
    # the figures exist on evaluation steps only: the last one in the window holds until the next (reported once)
    last_eval = next((r for r in reversed(recent[-HONESTY_STEPS:]) if named("honesty/reward_gain") in r), m)
    gain = last_eval.get(named("honesty/reward_gain"), math.nan)
    acc = last_eval.get(named("honesty/eval_accuracy_gain"), math.nan)
    besides = any(key.split("/")[1] not in VERIFIERS for key in m
                  if key.startswith("honesty/") and key.endswith("/reward_share"))
    if besides and math.isfinite(gain) and math.isfinite(acc) and gain >= GAIN_STD and acc <= 0.0:
        out.append(("eval_diverges", "warning", f"the training reward rose by {gain:.1f} std since the run began while "
                    f"held-out accuracy changed by {acc:+.0%}: the reward outruns the answers",
                    "compare the rewards' curves with eval/accuracy; the reward that rises alone is the one gamed"))
    ratio = m.get(named("honesty/group_spread_ratio"), math.nan)
    unsolved = _recent(recent, named("honesty/groups_none_solved"))
    if math.isfinite(ratio) and math.isfinite(unsolved) and ratio < SPREAD_RATIO and unsolved >= UNSOLVED:
        out.append(("reward_collapse", "warning", f"the reward's spread within groups fell to {ratio:.0%} of the "
                    f"run's start while {unsolved:.0%} of groups have no right answer: the policy settled on "
                    "something the reward pays that is not the answer", "raise temperature or beta; check which "
                    "reward pays the settled completions (Groups, hacking suspects)"))
    return out
