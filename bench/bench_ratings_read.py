"""How long `labels.read` takes over many ratings: loose JSON files, then the same ratings compacted.

    .venv/bin/python bench/bench_ratings_read.py               # 20,000 ratings, median of 5 reads
    .venv/bin/python bench/bench_ratings_read.py --ratings 2000 --reads 3

The ratings are written as `labels.add` writes them (one file each, `labels._append`; the completion
lookup add does first is left out, it is not what is measured), over steps of 8 groups of 8, by three
labelers, one in 17 an undo. "loose" reads them with compaction held off (as a run rated by an older
grpo-lab, before its first read); "compacted" reads them after `labels.compact` folded them into one
Parquet part. Both reads must return the same ratings; the script says so or fails.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from grpo_lab.rundir import labels  # noqa: E402


def write_ratings(run: Path, n: int) -> None:
    for i in range(n):
        undone = i % 17 == 0
        labels._append(run, {"step": 1 + i // 64, "group": (i // 8) % 8, "sample_idx": i % 8, "prompt_id": f"p{i // 8}",
                             "completion_sha": labels.completion_sha(str(i)), "score": None if undone else float(i % 2),
                             "rank": None, "labeler": f"person{i % 3}", "time": time.time(), "undone": undone})


def median_read(run: Path, reads: int) -> tuple[float, int]:
    times, rows = [], 0
    for _ in range(reads):
        start = time.perf_counter()
        rows = len(labels.read(run))
        times.append(time.perf_counter() - start)
    return statistics.median(times), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ratings", type=int, default=20_000)
    parser.add_argument("--reads", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "rated"
        run.mkdir()
        start = time.perf_counter()
        write_ratings(run, args.ratings)
        print(f"wrote {args.ratings} rating files in {time.perf_counter() - start:.1f} s")

        every = labels.COMPACT_AT
        labels.COMPACT_AT = sys.maxsize  # hold compaction off: read the loose files as they are
        loose, rows = median_read(run, args.reads)
        before = labels.read(run, history=True)
        labels.COMPACT_AT = every
        print(f"loose files:  median {loose:.3f} s over {args.reads} reads ({rows} ratings count)")

        start = time.perf_counter()
        assert labels.compact(run)
        print(f"compaction:   {time.perf_counter() - start:.3f} s (once; {len(list(run.glob('labels/*.parquet')))} part, "
              f"{len(os.listdir(run / 'labels' / 'ratings'))} loose files left)")
        compacted, rows_after = median_read(run, args.reads)
        after = labels.read(run, history=True)
        print(f"compacted:    median {compacted:.3f} s over {args.reads} reads ({rows_after} ratings count)")
        assert rows_after == rows and after.equals(before), "compaction changed what is read"
        print(f"same ratings before and after; {loose / compacted:.0f}x faster")


if __name__ == "__main__":
    main()
