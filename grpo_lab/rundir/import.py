"""python -m grpo_lab.rundir.import SOURCE --name NAME: a finished TRL or verl run as a run directory.

SOURCE is a TRL output folder (completions/completions_<step>.parquet from log_completions=True,
and trainer_state.json), a verl rollout dump (trainer.rollout_data_dir: <step>.jsonl files), or a
tracker's log (importers/trackers.py): TensorBoard event files (verl's, OpenRLHF's, this lab's), a
wandb offline run, a run in a trackio store (--run PROJECT/RUN), a NeMo-RL log folder
(train_data_step<N>.jsonl files) or a prime-rl output folder (rollouts/step_<N>/train/*/traces.jsonl).
The run is written into a temporary folder beside the target and renamed at the end; a source
that cannot be read gets one line naming the file and what was expected, and exit status 2.
See docs/trl-and-verl.md.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import threading
from pathlib import Path

from grpo_lab.rundir.importers import nemo_rl, prime_rl, trackers, trl, verl
from grpo_lab.rundir.importers.build import SourceError, build_run
from grpo_lab.rundir.layout import default_runs_dir
from grpo_lab.rundir.reader import RunNameError, check_name
from grpo_lab.objective.options import STD_MODES

FORMATS = ("auto", "trl", "verl", "nemo-rl", "prime-rl", *trackers.KINDS)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m grpo_lab.rundir.import", description=__doc__.split("\n\n")[0])
    p.add_argument("source", help="a TRL output folder, a verl rollout dump folder, or a tracker's log: TensorBoard "
                                  "event files' folder, a wandb offline run (or its wandb/ folder), a trackio store")
    p.add_argument("--name", required=True, help="the new run's name (letters, digits, . _ -)")
    p.add_argument("--runs-dir", default=None, help="folder of run directories (default: $GRPO_LAB_RUNS_DIR or ./runs)")
    p.add_argument("--format", choices=FORMATS, default="auto", help="what SOURCE is (auto: look at its files)")
    p.add_argument("--std-mode", choices=STD_MODES, default="sample",
                   help="verl: how the advantages are recomputed (sample: N-1 std, as verl's GRPO; group: 1/G, "
                        "the chapter). TRL: recorded only (TRL's own advantages are kept); sample is TRL's default")
    p.add_argument("--group-size", type=int, default=None,
                   help="TRL: num_generations; verl: rollout.n, for a dump without uid; NeMo-RL: "
                        "num_generations_per_prompt (default: inferred from how often each prompt appears)")
    p.add_argument("--reward-weights", default="",
                   help="TRL: reward_weights as name=weight,... for the total reward column (default: read back "
                        "from the run's logged reward; the import asks for this option when it cannot be)")
    p.add_argument("--run", default=None, help="trackio: the run as PROJECT/RUN in the store SOURCE")
    p.add_argument("--tensorboard", default=None, metavar="DIR",
                   help="verl: the run's TensorBoard folder (trainer.logger=tensorboard: tensorboard_log/<project>/"
                        "<experiment>), whose scalars join the dump's steps: rollout_corr/* as mismatch/*, losses, "
                        "entropy, lengths (docs/trl-and-verl.md)")
    return p.parse_args(argv)


def weights(text: str) -> dict[str, float]:
    out = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, _, value = item.partition("=")
        try:
            if not key.strip():
                raise ValueError
            out[key.strip()] = float(value)
            if not math.isfinite(out[key.strip()]):
                raise ValueError
        except ValueError:
            raise SourceError(f"--reward-weights {text!r}: expected name=weight,... "
                              "(e.g. correct=1,format=0.5)") from None
    return out


def _interrupted(signum: int, frame) -> None:
    raise SystemExit(128 + signum)  # unwinds through build_run, which removes its .tmp-import-* folder


def main(argv: list[str] | None = None) -> int:
    """SIGTERM and SIGHUP end the import as Ctrl-C does: the temporary folder is removed."""
    if threading.current_thread() is not threading.main_thread():
        return run(argv)
    saved = {sig: signal.signal(sig, _interrupted) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return run(argv)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def import_folder(source: Path, name: str, runs_dir: Path, *, fmt: str = "auto", std_mode: str = "sample",
                  group_size: int | None = None, reward_weights: str = "", run: str | None = None,
                  tensorboard: str | None = None) -> tuple[str, Path]:
    """(format, new run folder) of `source` imported as runs_dir/name; SourceError or RunNameError,
    one line, and nothing written, when it cannot be (the command line and the Runs page both call this)."""
    check_name(name)
    if not source.is_dir():
        raise SourceError(f"{source}: expected a folder (a TRL output folder or a verl rollout dump)")
    if group_size is not None and group_size < 1:
        raise SourceError(f"--group-size {group_size}: must be >= 1")
    kind = fmt
    if kind == "auto":
        kind = ("trl" if trl.looks_like(source) else "nemo-rl" if nemo_rl.looks_like(source) else
                "prime-rl" if prime_rl.looks_like(source) else "verl" if verl.looks_like(source) else
                trackers.looks_like(source))
    if kind is None:
        raise SourceError(f"{source}: expected a TRL output folder (completions/completions_<step>.parquet, "
                          "trainer_state.json), a verl rollout dump (<step>.jsonl files) or a tracker's log "
                          "(events.out.tfevents.*, a wandb offline run, a trackio store)")
    if tensorboard and kind != "verl":
        raise SourceError(f"--tensorboard {tensorboard}: joins a verl rollout dump's steps; SOURCE is {kind}")
    if kind in trackers.KINDS:
        logged = trackers.read(kind, source, run)  # read before the run folder exists
        fill = lambda paths: trackers.convert(logged, paths, name=name, kind=kind, source=source)  # noqa: E731
    elif kind == "nemo-rl":
        fill = lambda paths: nemo_rl.convert(source, paths, name=name, group_size=group_size)  # noqa: E731
    elif kind == "prime-rl":
        fill = lambda paths: prime_rl.convert(source, paths, name=name, group_size=group_size)  # noqa: E731
    elif kind == "trl":
        w = weights(reward_weights)
        fill = lambda paths: trl.convert(source, paths, name=name, std_mode=std_mode,  # noqa: E731
                                         group_size=group_size, reward_weights=w)
    else:
        scalars = trackers.scalars_by_step("tensorboard", Path(tensorboard)) if tensorboard else None
        fill = lambda paths: verl.convert(source, paths, name=name, std_mode=std_mode,  # noqa: E731
                                          group_size=group_size, logged=scalars)
    return kind, build_run(runs_dir, name, fill)


def run(argv: list[str] | None) -> int:
    args = parse(argv)
    source = Path(args.source)
    try:
        kind, target = import_folder(source, args.name, Path(args.runs_dir or default_runs_dir()), fmt=args.format,
                                     std_mode=args.std_mode, group_size=args.group_size,
                                     reward_weights=args.reward_weights, run=args.run, tensorboard=args.tensorboard)
    except (SourceError, RunNameError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"imported {kind} run {source} -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
