"""The correctness reward with math-verify: every kind of answer it was found to mark wrong.

Each case is (completion, gold, right?). They are written for this project, one group per kind
of failure found; bench/bench_verifier.py also reads CASES as "our own set".
"""

import re
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from grpo_lab import rewards
from grpo_lab.rewards import math_verify_pool
from grpo_lab.rewards.verifier import PATHS, explain, judge
from trainer_helpers import wait_until

EQUATIONS_AND_LABELS = [
    ("So the solution set is $x \\geq 5$.", "x >= 5", True),
    ("The final answer is $x \\ge 5$", "$x \\geq 5$", True),
    ("\\boxed{x > 5}", "x \\geq 5", False),
    ("We find $k=1$.", "1", True),
    ("\\boxed{k = 2}", "1", False),
    ("Answer: $y = 2x + 3$", "y=3+2x", True),
    ("\\boxed{y = 2x - 3}", "y=3+2x", False),
    ("\\boxed{x = 4}", "$x=4$", True),
    ("\\boxed{-3 < x < 3}", "$-3<x<3$", True),
]
BOXED_AND_SOLUTION_GOLDS = [
    ("0.75", "\\boxed{\\frac{3}{4}}", True),
    ("The answer is 12", "Each row has 4 seats and there are 3 rows, so $3 \\cdot 4 = \\boxed{12}$.", True),
    ("The answer is 13", "Each row has 4 seats and there are 3 rows, so $3 \\cdot 4 = \\boxed{12}$.", False),
    ("\\boxed{\\sqrt{8}}", "The diagonal is $\\sqrt{4+4} = \\boxed{2\\sqrt{2}}$.", True),
    ("\\boxed{2}", "The diagonal is $\\sqrt{4+4} = \\boxed{2\\sqrt{2}}$.", False),
    ("The answer is $x^2 - 1$", "Multiply out: $\\boxed{(x-1)(x+1)}$", True),
]
TUPLES_SETS_INTERVALS = [
    ("\\boxed{(1, 4.5)}", "(1,\\frac{9}{2})", True),
    ("\\boxed{(4.5, 1)}", "(1,\\frac{9}{2})", False),
    ("The roots are $\\boxed{3}$ and $\\boxed{-2}$.", "-2, 3", True),
    ("The roots are $\\boxed{3}$ and $\\boxed{2}$.", "-2, 3", False),
    ("\\boxed{[2, 5)}", "[2,5)", True),
    ("\\boxed{(2, 5]}", "[2,5)", False),
    ("\\boxed{\\{3, 2, 1\\}}", "\\{1, 2, 3\\}", True),
    ("$x \\in (-\\infty, 0) \\cup (1, \\infty)$", "(-\\infty,0)\\cup(1,\\infty)", True),
]
MATRICES = [
    ("$\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}$", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", True),
    ("$\\begin{pmatrix} 1 & 3 \\\\ 2 & 4 \\end{pmatrix}$", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", False),
    ("\\boxed{\\begin{bmatrix} 0.5 \\\\ 2 \\end{bmatrix}}", "\\begin{pmatrix} \\frac12 \\\\ 2 \\end{pmatrix}", True),
]
NUMBER_FORMATS = [
    ("The farm has 1 000 sheep.", "1000", True),
    ("\\boxed{14{,}916}", "14916", True),
    ("\\boxed{14{,}916}", "916", False),
    ("Answer: 1,234,567.", "1234567", True),
    ("Answer: 1000,99", "1000.99", True),
    ("\\boxed{1\\,000}", "1000", True),
    ("\\boxed{7 425 000}", "7,425,000", True),
    ("The answer is 2.50 dollars.", "2.5", True),
]
LATEX_SHORTHAND = [
    ("$\\frac13$", "1/3", True),
    ("\\boxed{\\frac13}", "\\frac{1}{3}", True),
    ("\\boxed{\\sqrt3}", "\\sqrt{3}", True),
    ("\\boxed{\\cfrac{2}{3}}", "2/3", True),
    ("\\boxed{\\dfrac{\\sqrt{2}}{2}}", "\\frac{1}{\\sqrt{2}}", True),
    ("\\boxed{\\sqrt3}", "3", False),
]
EXPRESSIONS = [  # an expression is its value, not its last number
    ("\\boxed{\\sqrt{17}}", "17", False),
    ("\\boxed{17}", "\\sqrt{17}", False),
    ("\\boxed{4\\sqrt{2}}", "4", False),
    ("\\boxed{2\\pi}", "6.28", False),
    ("\\boxed{\\frac{10}{4}}", "2.5", True),
]
FINAL_LINE_AFTER_BOXED = [
    ("A first guess is $\\boxed{3}$, which fails.\nThe final answer is 5.", "5", True),
    ("A first guess is $\\boxed{3}$, which fails.\nThe final answer is 5.", "3", False),
    ("The final answer is $\\boxed{5}$. I hope it is correct.", "5", True),
]
FALSE_POSITIVES = [  # the old "last number" rule accepted each of these
    ("$\\frac{1+\\sqrt{5}}{2}$", "2", False),
    ("The ratio is $\\frac{1+\\sqrt{5}}{2}$", "2", False),
    ("\\boxed{x^2 + 1}", "1", False),
    ("\\boxed{10^{-3}}", "3", False),
]
GSM8K = [
    ("So she has 42 cookies.\n#### 42", "She buys 6 packs of 7.\n6 * 7 = <<6*7=42>>42 cookies\n#### 42", True),
    ("#### 41", "She buys 6 packs of 7.\n6 * 7 = <<6*7=42>>42 cookies\n#### 42", False),
    ("The answer is 1200.", "Half of 2,400 is 1,200.\n#### 1,200", True),
    ("They paid $1,200 in total.", "#### 1200", True),
]
CASES = (EQUATIONS_AND_LABELS + BOXED_AND_SOLUTION_GOLDS + TUPLES_SETS_INTERVALS + MATRICES + NUMBER_FORMATS
         + LATEX_SHORTHAND + EXPRESSIONS + FINAL_LINE_AFTER_BOXED + FALSE_POSITIVES + GSM8K)

correct = rewards.build("correctness")


@pytest.mark.parametrize("completion, gold, right", CASES)
def test_verdicts(completion, gold, right):
    verdict = judge([completion], [gold])[0]
    assert verdict.score == float(right), verdict


def test_the_reward_scores_a_whole_batch_in_order():
    completions = [c for c, _, _ in CASES]
    assert correct(["q"] * len(CASES), completions, answer=[g for _, g, _ in CASES]) == [float(r) for *_, r in CASES]


# --- strict vs lenient ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion, gold, lenient, strict",
    [
        ("42", "42", 1.0, 0.0),  # the demo's bare answers: lenient only
        ("I think it is 42", "42", 1.0, 0.0),
        ("\\boxed{42}", "42", 1.0, 1.0),
        ("Answer: 42", "42", 1.0, 1.0),
        ("The final answer is $\\frac{1}{2}$", "0.5", 1.0, 1.0),
        ("3 + 4 = 7", "7", 1.0, 0.0),
        ("B", "B", 1.0, 0.0),  # multiple choice follows the same rule
        ("The answer is (B).", "B", 1.0, 1.0),
        ("", "42", 0.0, 0.0),
    ],
)
def test_strict_needs_a_marked_answer(completion, gold, lenient, strict):
    assert rewards.build("correctness")(["q"], [completion], answer=[gold]) == [lenient]
    assert rewards.build("correctness", mode="strict")(["q"], [completion], answer=[gold]) == [strict]


def test_a_bad_mode_fails_at_build():
    with pytest.raises(ValueError, match="mode must be one of lenient, strict"):
        rewards.build("correctness", mode="loose")


# --- which path decides -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion, gold, path",
    [
        ("7", "7", "number"),
        ("The answer is 1,234.", "1234", "number"),
        ("0.5", "50%", "math-verify"),  # different values with a percent sign: math-verify's rule
        ("0.3333333", "1/3", "math-verify"),  # closer than 10^-6: math-verify's rounding
        ("0.33", "1/3", "number"),
        ("twenty", "20", "no answer"),
        ("(C)", "C", "choice"),
        ("\\boxed{x+x}", "2x", "math-verify"),
        ("3", None, "no gold"),
    ],
)
def test_paths(completion, gold, path):
    assert judge([completion], [gold])[0].path == path


def test_the_number_path_agrees_with_math_verify():
    """Every pair the number path decides, math-verify decides the same way."""
    pairs = [("7", "7"), ("7", "8"), ("-7", "7"), ("0.75", "3/4"), ("3/4", "0.7"), ("1,234", "1234"),
             ("1234.0", "1,234"), ("2.5", "2.4"), ("\\frac{3}{4}", "0.75"), ("5", "5.001"), ("19", "19.0")]
    here = judge([a for a, _ in pairs], [g for _, g in pairs])
    assert all(v.path == "number" for v in here), [v.path for v in here]
    jobs = [math_verify_pool.Job(gold=f"${g}$", answer=f"${a}$") for a, g in pairs]
    there = math_verify_pool.shared_pool(workers=1).judge(jobs, timeout_s=30)
    assert [v.score == 1.0 for v in here] == [o.verdict for o in there]


def test_the_demo_never_waits_for_math_verify():
    """The built-in task's completions (a number, a wrong number, nothing, letters) are all
    decided in this process: its step time does not change."""
    completions = ["7", "12", "", "0", "77", "abc", "7 ", "5."]
    verdicts = judge(completions, ["7"] * len(completions))
    assert {v.path for v in verdicts} <= {"number", "no answer"}
    assert [v.score for v in verdicts] == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]


# --- explain ----------------------------------------------------------------------------------


def test_explain_says_what_was_compared_and_who_decided():
    why = explain("A first guess is $\\boxed{3}$.\nThe final answer is $\\frac{1+\\sqrt{5}}{2}$.", "#### 2")
    assert why["verdict"] == 0.0 and why["path"] == "math-verify" and why["mode"] == "lenient"
    assert why["answer"] == "$\\frac{1+\\sqrt{5}}{2}$" and why["gold"] == "2"
    assert why["answer_read"] == "(1 + sqrt(5))/2" and why["gold_read"] == "2"
    assert set(why) == {"verdict", "path", "reason", "answer", "gold", "answer_read", "gold_read", "mode"}
    assert explain("12", "12")["path"] in PATHS
    assert explain("42", "42", mode="strict") == {
        "verdict": 0.0, "path": "no answer", "reason": "strict mode: no \\boxed{} and no answer line",
        "answer": None, "gold": "42", "answer_read": None, "gold_read": None, "mode": "strict"}


# --- bounded time, from any thread ------------------------------------------------------------

PATHOLOGICAL = [
    "$2^{2^{2^{2^{100}}}}$",  # one big-integer power: no signal can interrupt it
    "\\boxed{" + "(" * 80 + "1" + ")" * 80 + "}",  # deep nesting: the parser takes seconds
]


@pytest.mark.timeout(120)
def test_a_pathological_answer_gets_no_verdict_in_bounded_time_in_a_worker_thread():
    fn = rewards.build("correctness", timeout_s=1.0)
    math_verify_pool.shared_pool(workers=1).judge([math_verify_pool.Job(gold="1", answer="$1$")], 30)  # warm
    result = {}

    def score():
        start = time.perf_counter()
        result["scores"] = rewards.score_all({"correctness": (fn, 1.0)}, ["q"] * 4, PATHOLOGICAL + ["7", "$\\frac12$"],
                                             {"answer": ["5", "1", "7", "0.5"]})
        result["seconds"] = time.perf_counter() - start

    worker = threading.Thread(target=score)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "scoring hung"
    scores = result["scores"]
    assert scores.per_reward["correctness"] == [None, None, 1.0, 1.0]
    assert scores.errors == {"correctness": 2}  # counted like any reward error
    assert all("no verdict" in m and "over the 1 s limit" in m for m in scores.messages)
    assert result["seconds"] < 20  # two 1 s limits, restarts, scoring


def test_a_timeout_scores_none_for_direct_callers_as_trl_calls_it():
    fn = rewards.build("correctness", timeout_s=1.0)
    assert fn(["q", "q"], [PATHOLOGICAL[0], "7"], answer=["5", "7"]) == [None, 1.0]  # no exception: TRL's contract
    assert list(fn.problems) == [0] and "over the 1 s limit" in fn.problems[0]
    assert fn(["q"], ["7"], answer=["7"]) == [1.0] and fn.problems == {}  # reset by every call


def fake_child(tmp_path, body: str) -> str:
    path = tmp_path / "child.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_a_crashing_verifier_costs_only_its_pair(tmp_path, monkeypatch):
    # A child that answers ready, judges "ok" jobs, and dies on any other.
    monkeypatch.setattr(math_verify_pool, "CHILD", fake_child(tmp_path, """
        import json, os, sys
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            if json.loads(line)["answer"] != "ok":
                os._exit(3)
            print(json.dumps({"verdict": True, "gold": "1", "answer": "1"}), flush=True)
    """))
    pool = math_verify_pool.Pool(workers=1)
    jobs = [math_verify_pool.Job(gold="1", answer=a) for a in ["ok", "crash", "ok"]]
    outcomes = pool.judge(jobs, timeout_s=10)
    pool.close()
    assert [o.verdict for o in outcomes] == [True, None, True]
    assert outcomes[1].error == "the math-verify process died (exit code 3)" and not outcomes[1].timed_out


def test_a_verifier_that_cannot_start_fails_its_jobs_not_the_caller(tmp_path, monkeypatch):
    monkeypatch.setattr(math_verify_pool, "CHILD", fake_child(tmp_path, "raise SystemExit(1)\n"))
    pool = math_verify_pool.Pool(workers=2)
    outcomes = pool.judge([math_verify_pool.Job(gold="1", answer=str(i)) for i in range(3)], timeout_s=10)
    pool.close()
    assert [o.verdict for o in outcomes] == [None] * 3
    assert all(re.fullmatch(r"the math-verify process died \(exit code 1\)", o.error) for o in outcomes)


def counting_child(tmp_path, seconds_per_pair: float) -> str:
    """A child that notes its start in tmp_path/started and answers every pair True after `seconds_per_pair`."""
    return fake_child(tmp_path, f"""
        import json, sys, time
        with open({str(tmp_path / "started")!r}, "a") as started:
            started.write("1")
        print(json.dumps({{"ready": True}}), flush=True)
        for line in sys.stdin:
            time.sleep({seconds_per_pair})
            print(json.dumps({{"verdict": True}}), flush=True)
    """)


def test_quick_pairs_are_judged_by_the_one_child_start_made(tmp_path, monkeypatch):
    # a reward's build starts one child; pairs of ~10 ms never wait long enough to start a second
    monkeypatch.setattr(math_verify_pool, "CHILD", counting_child(tmp_path, 0.0))
    pool = math_verify_pool.Pool(workers=4)
    pool.start()
    pool.start()
    outcomes = pool.judge([math_verify_pool.Job(gold="1", answer=str(i)) for i in range(20)], timeout_s=10)
    pool.close()
    assert [o.verdict for o in outcomes] == [True] * 20
    assert (tmp_path / "started").read_text() == "1"


def test_pairs_still_waiting_start_more_children_up_to_workers(tmp_path, monkeypatch):
    monkeypatch.setattr(math_verify_pool, "CHILD", counting_child(tmp_path, 0.4))
    pool = math_verify_pool.Pool(workers=3)
    outcomes = pool.judge([math_verify_pool.Job(gold="1", answer=str(i)) for i in range(12)], timeout_s=10)
    pool.close()
    assert [o.verdict for o in outcomes] == [True] * 12
    assert (tmp_path / "started").read_text() == "111"  # one at first, two more once pairs waited GROW_AFTER_S


def test_children_end_with_the_process_that_started_them():
    script = textwrap.dedent("""
        import os
        from grpo_lab.rewards.verifier import judge
        from grpo_lab.rewards import math_verify_pool
        judge(["$x$"], ["x"])
        print(" ".join(str(c.proc.pid) for c in math_verify_pool.shared_pool(1)._children))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    pids = [int(p) for p in out.stdout.split()]
    assert pids
    # the kernel ends them when their parent exits, asynchronously
    wait_until(lambda: not any(_alive(pid) for pid in pids), timeout=10, what=f"children {pids} to end")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
