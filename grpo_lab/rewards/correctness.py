"""Correctness: 1.0 when the completion's final answer equals the gold, else 0.0, by math-verify.

The gold comes from a dataset column (default `answer`) and may be a bare answer ("19",
"$\\frac{1}{2}$", "x \\geq 5"), a `\\boxed{}` answer, a worked solution or a GSM8K
"... #### 72". Where the answer is looked for (`mode`), and who decides, is in
grpo_lab/rewards/verifier.py: plain numbers and letters are decided in this process, everything else
by math-verify in a child process with a time limit. No answer scores 0.0: the model had its
chance, and a wrong format is as wrong as a wrong number. A gold of None scores None.

A sample math-verify gives no verdict for (over `timeout_s`, or its process failed) scores
None, as TRL's reward contract allows, and counts as a reward error: the reward's `problems`
attribute names those samples and why (the contract's way to say why a score is missing, read
by `score_all`), so each gets a message. The call itself never raises for them.

>>> correct = correctness_reward()
>>> prompts = ["12+7=", "3-10=", "1000+234="]
>>> correct(prompts, ["19", "The answer is -7.", "1,234"], answer=["19", "-7", "1234"])
[1.0, 1.0, 1.0]
>>> correct(["q", "q"], ["no idea", "\\\\boxed{3/4}"], answer=["4", "#### 0.75"])
[0.0, 1.0]
>>> correctness_reward(mode="strict")(["q", "q"], ["7", "Answer: 7"], answer=["7", "7"])
[0.0, 1.0]
"""

from __future__ import annotations

import importlib.util
from dataclasses import asdict

from grpo_lab.rewards import math_verify_pool
from grpo_lab.rewards._text import as_text, require_column
from grpo_lab.rewards.registry import READS_COLUMN
from grpo_lab.rewards.verifier import MODES, Judging, judge, takes_judging


@takes_judging()
def correctness_reward(column: str = READS_COLUMN["correctness"], **options):
    """column: the dataset column with the gold; `options`: how the answer is judged, verifier.Judging's
    fields (mode, symbolic, multiple_choice, float_rounding, timeout_s, workers), each a reward_param."""
    how = Judging(**options)
    if how.mode not in MODES:
        raise ValueError(f"reward 'correctness': mode must be one of {', '.join(MODES)}, got {how.mode!r}")
    if not how.timeout_s or how.timeout_s <= 0:
        raise ValueError(f"reward 'correctness': timeout_s must be > 0, got {how.timeout_s!r}")
    if not isinstance(how.float_rounding, int) or how.float_rounding < 0:
        raise ValueError(f"reward 'correctness': float_rounding must be an integer >= 0, got {how.float_rounding!r}")
    if how.workers is not None and how.workers < 1:
        raise ValueError(f"reward 'correctness': workers must be >= 1 or None, got {how.workers!r}")
    if how.symbolic and importlib.util.find_spec("math_verify") is None:
        raise ValueError("reward 'correctness': the math-verify package is missing;"
                         " pip install -r requirements.txt (or pass symbolic=False)")
    if how.symbolic:  # its processes import sympy while the trainer loads the model, not on step 1
        math_verify_pool.shared_pool(how.workers or math_verify_pool.default_workers()).start()

    def correctness(prompts, completions, **columns) -> list[float | None]:
        golds = require_column(columns, column, "correctness")
        verdicts = judge([as_text(c) for c in completions], list(golds), **asdict(how))
        # no verdict: None, as TRL's contract has it; the reasons go where score_all reads them
        correctness.problems = {i: f"no verdict ({v.reason})" for i, v in enumerate(verdicts)
                                if v.path in ("timeout", "error")}
        return [v.score for v in verdicts]

    correctness.problems = {}

    return correctness
