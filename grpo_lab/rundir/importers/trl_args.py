"""The GRPOConfig a TRL output folder records: `training_args.bin`, read without running it.

TRL 1.16 (the transformers Trainer under it) saves its arguments with `torch.save(args)` beside
each checkpoint and at `save_model()`: a zip whose `*/data.pkl` is a pickle of the GRPOConfig
dataclass and the enums and accelerate objects it holds. A pickle names the classes to rebuild and
unpickling calls them, so a folder from someone else could run code if it were loaded as usual.
Here every class the pickle names is replaced by an inert record (`_Stub`) that keeps the
arguments and state it is given, and nothing is imported: the options come back as plain values.
Before it is loaded, the pickle is measured (pickle_limits.py): a few hundred bytes can describe
10^12 values through shared parts, which no reader would finish walking.
What TRL 1.16 writes nowhere else: `reward_weights` (trainer_state.json has no options).

>>> import pickle, types
>>> read_pickle(pickle.dumps(types.SimpleNamespace(reward_weights=[2.0, 0.5], num_generations=4)))
{'reward_weights': [2.0, 0.5], 'num_generations': 4}
"""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path
from typing import Any

from grpo_lab.rundir.importers import limits, pickle_limits
from grpo_lab.rundir.importers.build import SourceError

NAME = "training_args.bin"
MAX_BYTES = 16 << 20  # TRL's is about 8 KB; a larger file is not one


class _Stub:
    """Stands for any class the pickle names; records what it is given, runs nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.state = args, kwargs

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __reduce__(self):  # never pickled again
        raise TypeError("a stub")


class _InertUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        # a fresh subclass per name, so a stub says what it stood for
        return type(name, (_Stub,), {"__module__": "grpo_lab.stub." + module})

    def persistent_load(self, pid: Any) -> None:  # torch's storages (a tensor): none in a GRPOConfig
        return None


def _plain(value: Any, depth: int = 0) -> Any:
    """A stub's state as plain Python: enums as their value, objects as dicts, the rest as is."""
    if depth > 20:
        return None
    if isinstance(value, _Stub):
        if isinstance(value.state, dict) and value.state:
            return {str(k): _plain(v, depth + 1) for k, v in value.state.items()}
        return _plain(value.args[0], depth + 1) if len(value.args) == 1 else None  # an Enum("steps")
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def read_pickle(data: bytes) -> dict[str, Any]:
    """The options of a pickled GRPOConfig as {name: plain value}."""
    pickle_limits.measure(data)  # ValueError, one line: past a limit, or not a pickle
    try:
        obj = _InertUnpickler(io.BytesIO(data)).load()
    except Exception as exc:  # noqa: BLE001 - any malformed pickle is the source's problem, named by the caller
        raise ValueError(f"{type(exc).__name__}: {str(exc)[:200]}") from None
    options = _plain(obj)
    if not isinstance(options, dict):
        raise ValueError("not a pickled configuration object")
    return options


def read(path: Path) -> dict[str, Any]:
    """The GRPOConfig options saved in `path` (torch.save's zip, or a bare pickle)."""
    with limits.open_regular(path) as fh:
        raw = fh.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise SourceError(f"{path}: larger than {MAX_BYTES >> 20} MiB; not TRL's {NAME}")
    try:
        if zipfile.is_zipfile(io.BytesIO(raw)):
            with zipfile.ZipFile(io.BytesIO(raw)) as archive:
                member = next((n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"), None)
                if member is None or archive.getinfo(member).file_size > MAX_BYTES:
                    raise ValueError("no data.pkl of at most 16 MiB in the archive")
                raw = archive.read(member)
        return read_pickle(raw)
    except (ValueError, zipfile.BadZipFile, OSError) as exc:
        raise SourceError(f"{path}: expected TRL's {NAME} (a saved GRPOConfig); {exc}") from None


def find(source: Path, checkpoints: list[Path]) -> Path | None:
    """training_args.bin of the folder (save_model), else of its latest checkpoint."""
    for folder in (source, *checkpoints):
        if (folder / NAME).is_file():
            return folder / NAME
    return None


def reward_weights(options: dict[str, Any], n_functions: int, where: str) -> list[float] | None:
    """The weights the run trained with, in reward_funcs order, as TRL sets them: GRPOConfig
    `reward_weights`, or 1 for each function when it is None; then 1 for each environment class
    whose get_reward TRL appended (it adds them after reward_funcs, weight 1). None: the options
    do not say (not a GRPOConfig)."""
    if "reward_weights" not in options:
        return None
    given = options["reward_weights"]
    if given is None:
        return [1.0] * n_functions
    if not isinstance(given, list) or not all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in given):
        raise SourceError(f"{where}: reward_weights is {given!r}; expected a list of numbers")
    weights = [float(limits.number(w, where, "reward_weights")) for w in given]
    if len(weights) > n_functions:
        raise SourceError(f"{where}: {len(weights)} reward_weights for the {n_functions} reward functions logged")
    return weights + [1.0] * (n_functions - len(weights))
