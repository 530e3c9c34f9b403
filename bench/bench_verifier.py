"""The correctness verifier before and after math-verify: verdicts, speed, the demo's step.

    .venv/bin/python bench/bench_verifier.py --math-verify-repo PATH   # a checkout of Math-Verify
    .venv/bin/python bench/bench_verifier.py                           # our own set only

1. Right / false negatives / false positives on (gold, prediction, expected) pairs, scored as the
   trainer scores them, `grpo_lab.rewards.build("correctness")(prompts, completions, answer=golds)`:
   - Math-Verify's own test pairs, read from a local checkout of github.com/huggingface/Math-Verify
     (its tests/*.py are parsed here with `ast`; nothing of them is stored in this project);
     "math-verify alone" is its parse + verify with default settings, for reference;
   - our own set, tests/rewards/test_rewards_math_verify.py CASES.
   "old" is grpo_lab/rewards/verifier.py as it was before math-verify (from git; --old-rev to choose).
2. Seconds per 1,000 verifications: on that mixed set (math-verify's verdict cache cleared,
   its worker processes already started), and on plain integers.
3. The built-in demo's scoring per step: 32 prompts x 8 completions of "a+b=", mostly numbers
   with some of the junk a half-trained tiny model writes (--demo-junk: 4% like a run's first
   20 steps by default; about 0.2% by its last ones).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import logging
import math
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grpo_lab import rewards  # noqa: E402
from grpo_lab.rewards import math_verify_pool, verifier  # noqa: E402

MATH_VERIFY_TESTS = ["test_all.py", "test_numina_cases.py", "test_open_thoughts.py", "test_yujianll.py",
                     "test_boxed.py", "test_strict.py"]
# What the warm-started tiny model writes besides numbers (seen in a demo run's samples table: about 4%
# of the first 20 steps' completions, 0.2% of the last ones).
DEMO_JUNK = ["=4", "+6", "u7", "d6", "h8", "5?3", "6wm8", "1+", "", "e"]


def math_verify_pairs(repo: Path) -> list[tuple[str, str, bool]]:
    """(gold, prediction, expected) from every `@pytest.mark.parametrize` with gold and pred
    arguments in Math-Verify's tests; the lists are literals (one f-string needs `math`)."""
    pairs = []
    for name in MATH_VERIFY_TESTS:
        tree = ast.parse((repo / "tests" / name).read_text())
        for node in ast.walk(tree):
            for decorator in getattr(node, "decorator_list", []):
                if not (isinstance(decorator, ast.Call) and getattr(decorator.func, "attr", "") == "parametrize"):
                    continue
                names = [n.strip() for n in ast.literal_eval(decorator.args[0]).split(",")]
                if "gold" not in names or "pred" not in names:
                    continue
                literal = compile(ast.Expression(decorator.args[1]), name, "eval")
                rows = eval(literal, {"__builtins__": {}, "math": math})  # literals and one f-string
                for row in rows:
                    values = dict(zip(names, row))
                    expected = values.get("expected", values.get("result"))
                    pairs.append((str(values["gold"]), str(values["pred"]), bool(expected)))
    return pairs


def own_pairs() -> list[tuple[str, str, bool]]:
    sys.path.insert(0, str(ROOT / "tests"))  # the test module imports its helpers
    spec = importlib.util.spec_from_file_location("own_cases", ROOT / "tests" / "rewards" / "test_rewards_math_verify.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [(gold, completion, right) for completion, gold, right in module.CASES]


def old_verifier(rev: str | None):
    """grpo_lab/rewards/verifier.py as of `rev`, or of the last commit before it used math-verify
    (before the package was named grpo_lab it was rewards/verifier.py)."""
    paths = ("grpo_lab/rewards/verifier.py", "rewards/verifier.py")

    def show(commit):
        for path in paths:
            found = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, text=True)
            if found.returncode == 0:
                return found.stdout
        raise SystemExit(f"--old-rev: {commit} has no verifier.py")
    if rev is None:
        log = subprocess.run(["git", "log", "--format=%H", "--", *paths], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
        rev = next(c for c in log if "math_verify" not in show(c))
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        # its helpers were `rewards.*` before the package was named grpo_lab (symbolic.py unchanged since)
        f.write(show(rev).replace("from rewards.", "from grpo_lab.rewards."))
    spec = importlib.util.spec_from_file_location("old_verifier", f.name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return rev[:7], module


def old_reward(old):
    def correctness(prompts, completions, answer):
        return [float(old.answers_match(c, g)) for c, g in zip(completions, answer)]
    return correctness


def math_verify_alone(prompts, completions, answer):
    from math_verify import parse, verify  # default settings, its own (main-thread) timeouts
    return [float(verify(parse(g), parse(c))) for c, g in zip(completions, answer)]


def tally(scores, pairs) -> str:
    right = sum((s == 1.0) == expected for s, (_, _, expected) in zip(scores, pairs))
    false_neg = sum(s != 1.0 and expected for s, (_, _, expected) in zip(scores, pairs))
    false_pos = sum(s == 1.0 and not expected for s, (_, _, expected) in zip(scores, pairs))
    return (f"{right:4d} / {len(pairs)} = {100 * right / len(pairs):5.1f}%   false negatives {false_neg:4d}   "
            f"false positives {false_pos:3d}")


def timed(fn, pairs, repeats: int = 1) -> tuple[list, float]:
    """(scores, seconds per 1,000 pairs, the best of `repeats`, math-verify's verdict cache
    cleared before each); no verdict in time scores None."""
    best = math.inf
    for _ in range(repeats):
        verifier._CACHE.clear()
        start = time.perf_counter()
        scores = fn(["q"] * len(pairs), [p for _, p, _ in pairs], answer=[g for g, _, _ in pairs])
        best = min(best, time.perf_counter() - start)
    return scores, best * 1000 / len(pairs)


def demo_batches(steps: int, junk: float, seed: int = 0) -> list[tuple[list, list, list]]:
    rng = random.Random(seed)
    batches = []
    for _ in range(steps):
        prompts, completions, golds = [], [], []
        for _ in range(32):
            a, b = rng.randrange(6), rng.randrange(6)
            for _ in range(8):
                roll = rng.random()
                text = rng.choice(DEMO_JUNK) if roll < junk else str(a + b) if roll < 0.5 else str(rng.randrange(11))
                prompts.append(f"{a}+{b}=")
                completions.append(text)
                golds.append(str(a + b))
        batches.append((prompts, completions, golds))
    return batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--math-verify-repo", type=Path, help="a local checkout of huggingface/Math-Verify")
    parser.add_argument("--old-rev", help="git revision of the old verifier (default: the last before math-verify)")
    parser.add_argument("--demo-steps", type=int, default=50)
    parser.add_argument("--demo-junk", type=float, default=0.04, help="share of non-number completions")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # math-verify's "Timeout during ..." lines
    rev, old = old_verifier(args.old_rev)
    new = rewards.build("correctness")
    workers = math_verify_pool.default_workers()
    math_verify_pool.shared_pool(workers).judge([math_verify_pool.Job(gold="1", answer="1")] * workers, 60)  # start
    print(f"old: grpo_lab/rewards/verifier.py at {rev}; new: math-verify, {workers} worker process(es)\n")

    sets = {"our own set (tests/rewards/test_rewards_math_verify.py)": own_pairs()}
    if args.math_verify_repo:
        sets = {f"Math-Verify's test pairs ({args.math_verify_repo})": math_verify_pairs(args.math_verify_repo), **sets}
    mixed = []
    for title, pairs in sets.items():
        mixed += pairs
        print(title)
        rows = [("old", old_reward(old)), ("new", new)]
        if args.math_verify_repo:
            rows.append(("math-verify alone", math_verify_alone))
        for label, fn in rows:
            scores, per_1000 = timed(fn, pairs)
            print(f"  {label:18s} {tally(scores, pairs)}   {per_1000:6.2f} s per 1,000")
        print()

    rng = random.Random(1)
    golds = [rng.randrange(-999, 10**6) for _ in range(1000)]
    integers = [(str(g), str(p), g == p) for g, p in ((g, g + rng.choice([0, 0, 1, -1])) for g in golds)]
    print(f"seconds per 1,000 verifications, best of 3 ({len(mixed)} mixed pairs, math-verify's cache cleared; "
          f"1,000 integer pairs)")
    for label, fn in [("old", old_reward(old)), ("new", new)]:
        _, per_mixed = timed(fn, mixed, repeats=3)
        _, per_int = timed(fn, integers, repeats=3)
        print(f"  {label:4s} mixed {per_mixed:8.3f} s   plain integers {per_int:8.4f} s")
    print()

    batches = demo_batches(args.demo_steps, args.demo_junk)
    paths = {}
    for _, completions, golds in batches[:5]:
        for v in verifier.judge(completions, golds):
            paths[v.path] = paths.get(v.path, 0) + 1
    print(f"demo scoring, {len(batches[0][1])} completions per step, mean of {len(batches)} steps, best of 3 "
          f"(paths of the new verifier on the first 5 steps: {paths})")
    for label, fn in [("old", old_reward(old)), ("new", new)]:
        best = math.inf
        for _ in range(3):
            verifier._CACHE.clear()
            start = time.perf_counter()
            for prompts, completions, golds in batches:
                rewards.score_all({"correctness": (fn, 1.0)}, prompts, completions, {"answer": golds})
            best = min(best, time.perf_counter() - start)
        print(f"  {label:4s} {best * 1000 / len(batches):7.2f} ms per step")


if __name__ == "__main__":
    main()
