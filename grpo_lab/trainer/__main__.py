"""python -m grpo_lab.trainer: train with GRPO or PPO; see --help for every option.

Exit status (grpo_lab/trainer/outcome.py): 0 finished or stopped by a signal, 1 failed (or no reward
ever scored), 2 refused before starting, 3 stopped by the run doctor (--stop-on)."""

from __future__ import annotations

import gc
import os
import sys
import time

from grpo_lab.trainer.config import ConfigError, load_config
from grpo_lab.trainer.preflight import preflight

# How long a process other than rank 0 waits, after refusing, for the launcher to end it (rank 0 has
# exited with its one line by then); a rank that refuses alone waits it out, then says why itself.
RANK_REFUSAL_WAIT_S = 10.0


def main(argv: list[str] | None = None) -> int:
    # No collections while torch, transformers and the models load: what they allocate lives all run,
    # and train() freezes it once set up, so later collections skip it (a 3-step demo run: 5.0 s of
    # CPU before, 3.5 s after; bench/bench_trainer_start.py)
    gc.disable()
    try:
        cfg = load_config(argv)
        tasks = preflight(cfg)
        from grpo_lab.trainer.run import train  # torch and transformers load only after the config is good

        return train(cfg, tasks)
    except ConfigError as exc:
        if os.environ.get("RANK", "0") == "0":  # under a launcher every process refuses; rank 0 says why
            print(f"error: {exc}", file=sys.stderr)
        else:  # the launcher ends every process once one exits: leaving first could end rank 0 unheard
            time.sleep(RANK_REFUSAL_WAIT_S)
            print(f"error (rank {os.environ['RANK']}): {exc}", file=sys.stderr)  # still here: rank 0 did not refuse
        return 2
    finally:
        gc.unfreeze()  # so the exit's collection frees them: duckdb's bindings report what was never freed
        gc.enable()  # refused before train() froze anything: a caller in this process gets collections back


if __name__ == "__main__":
    sys.exit(main())
