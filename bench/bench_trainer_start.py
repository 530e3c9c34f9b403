"""The CPU a short trainer run costs, as the command line ships and with collections left on during
set-up (what the trainer did before it froze its set-up objects: grpo_lab/trainer/__main__.py).

    .venv/bin/python bench/bench_trainer_start.py            # 5 runs of each, a 3-step demo run
    .venv/bin/python bench/bench_trainer_start.py --runs 9

Most of a short run is loading torch and transformers; the test suite starts ~170 of these, so
each second here is about three minutes of suite CPU. Prints each way's median user+sys seconds.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = ["--prompts-per-step", "4", "--group-size", "4", "--sft-steps", "20", "--flush-seconds", "0", "--max-steps", "3"]
WAYS = {
    "as shipped (set-up without collections, then frozen)": ["-m", "grpo_lab.trainer"],
    "collections on during set-up": ["-c", "import gc, sys; gc.disable = lambda: None; "
                                           "from grpo_lab.trainer.__main__ import main; sys.exit(main(sys.argv[1:]))"],
}


def cpu_of(cmd: list[str], env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ROOT}
    seconds: dict[str, list[float]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):  # alternated, so a slower minute of the machine hits both ways
            for w, (way, how) in enumerate(WAYS.items()):
                cmd = [sys.executable, *how, "--runs-dir", tmp, "--name", f"run{i}-way{w}", *ARGS]
                seconds[way].append(cpu_of(cmd, env))
    for way, values in seconds.items():
        print(f"{way:55s} median {statistics.median(values):5.2f} s CPU  "
              f"(min {min(values):.2f}, max {max(values):.2f}, {runs} runs)")


if __name__ == "__main__":
    main()
