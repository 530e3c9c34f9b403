"""python -m grpo_lab.trainer: train with GRPO or PPO; see --help for every option.

Exit status (grpo_lab/trainer/outcome.py): 0 finished or stopped by a signal, 1 failed (or no reward
ever scored), 2 refused before starting, 3 stopped by the run doctor (--stop-on)."""

from __future__ import annotations

import os
import sys

from grpo_lab.trainer.config import ConfigError, load_config
from grpo_lab.trainer.preflight import preflight


def main(argv: list[str] | None = None) -> int:
    try:
        cfg = load_config(argv)
        tasks = preflight(cfg)
        from grpo_lab.trainer.run import train  # torch and transformers load only after the config is good

        return train(cfg, tasks)
    except ConfigError as exc:
        if os.environ.get("RANK", "0") == "0":  # under a launcher every process refuses; rank 0 says why
            print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
