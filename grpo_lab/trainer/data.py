"""Prompt datasets through Hugging Face `datasets`: local JSONL / JSON / CSV / Parquet files, dataset
directories and hub datasets, turned into task rows with a column mapping and checked row by row.

Every row becomes {prompt_id, prompt, answer?, tests?, system?, ...}: `columns` maps each field to
the dataset's column (default: the same name; a mapped column is renamed). `prompt` is required; a
field mapped explicitly must exist. Every other column passes through under its own name, so the
rewards get each column of the row, as TRL gives them. Bad data is a ConfigError naming the
file, the row (1-based, header not counted) and the column, raised before the run directory exists.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grpo_lab.rewards.registry import READS_COLUMN
from grpo_lab.trainer.config import BUILTIN_TASKS, Config, ConfigError
from grpo_lab.trainer.hub import hub_reachable, looks_local
from grpo_lab.trainer.tasks import Task, arithmetic, big_arithmetic, word_problems

FILE_FORMATS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
MAX_PROMPT_CHARS = 100_000  # far beyond any context window; a longer "prompt" is a broken file
MAX_LINE_BYTES = 4 * 2**20


def is_data_file(source: str) -> bool:
    return Path(source).suffix.lower() in FILE_FORMATS


def load_task_rows(source: str, columns: dict[str, str], config: str = "", split: str = "train",
                   option: str = "task") -> list[dict[str, Any]]:
    """Rows of a dataset file, directory or hub dataset; `option` names the config field in errors."""
    dataset, where = _load(source, config, split, option)
    return _rows(dataset, where, columns, option)


def _load(source: str, config: str, split: str, option: str):
    import datasets

    datasets.disable_progress_bars()
    path = Path(source).expanduser()
    if is_data_file(source):
        if not path.is_file():
            raise ConfigError(f"{option}: no file at {source!r} (a .jsonl, .json, .csv or .parquet prompt file)")
        if split != "train" and option == "task":
            raise ConfigError("dataset_split: a single file has one split; leave dataset_split as train "
                              "(for held-out prompts use eval_split FILE or eval_fraction)")
        fmt = FILE_FORMATS[path.suffix.lower()]
        if fmt != "parquet":
            _scan_text(path, option)
        try:
            return datasets.load_dataset(fmt, data_files=str(path), split="train"), path.name
        except Exception as exc:  # noqa: BLE001 - any parse failure becomes one line naming the file
            raise ConfigError(f"{option}: {_parse_failure(path, fmt, exc)}") from None
    local = looks_local(source)
    if local and not path.is_dir():
        raise ConfigError(f"{option}: no file or dataset directory at {source!r}; use arithmetic, word_problems, a "
                          ".jsonl/.json/.csv/.parquet file, or a Hugging Face dataset name")
    try:
        if local and (path / "dataset_info.json").is_file():  # a folder written by save_to_disk
            saved = datasets.load_from_disk(str(path))
            return (saved[split] if isinstance(saved, datasets.DatasetDict) else saved), f"{source} [{split}]"
        if not local and not hub_reachable():
            datasets.config.HF_HUB_OFFLINE = True  # the local cache only: fail at once, not after retries
        return datasets.load_dataset(str(path) if local else source, config or None, split=split), \
            f"{source} [{split}]"
    except Exception as exc:  # noqa: BLE001 - offline, unknown name, bad split or config: one line
        detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        hint = "" if local else ("; offline, save it as a .jsonl/.csv/.parquet file (or with save_to_disk) "
                                       "and pass its path")
        raise ConfigError(f"{option}: cannot load dataset {source!r} (config {config or 'default'}, split {split}: "
                          f"{detail}){hint}") from None


def _scan_text(path: Path, option: str) -> None:
    """Refuse a text file with a line that is not UTF-8 or absurdly long, naming the line, before a
    parser buries it in a traceback (or a tokenizer runs out of memory on it)."""
    one_line = path.suffix.lower() in (".jsonl", ".csv")  # a .json document may be one long line
    with path.open("rb") as f:
        for number, line in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), start=1):
            if one_line and len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                raise ConfigError(f"{option}: {path.name}, line {number}: longer than {MAX_LINE_BYTES // 2**20} MB; "
                                  f"a prompt may be at most {MAX_PROMPT_CHARS} characters")
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as err:
                if one_line or len(line) <= MAX_LINE_BYTES:  # a cut may split a character: judged whole
                    raise ConfigError(f"{option}: {path.name}, line {number}: not UTF-8 text (byte {err.start + 1}: "
                                      f"{line[err.start:err.start + 1]!r}); save the file as UTF-8") from None


def _parse_failure(path: Path, fmt: str, exc: Exception) -> str:
    """Say where a file fails to parse; for JSON Lines find the line ourselves (pyarrow's row is vague)."""
    if fmt == "json" and path.suffix.lower() == ".jsonl":
        with path.open(encoding="utf-8", errors="replace") as f:
            number = 0
            for line in f:
                if not line.strip():
                    continue
                number += 1
                try:
                    value = json.loads(line)
                except json.JSONDecodeError as err:
                    return f"{path.name}, row {number}: not valid JSON ({err.msg})"
                if not isinstance(value, dict):
                    return f"{path.name}, row {number}: must be a JSON object, got {type(value).__name__}"
    cause = exc.__cause__ or exc
    detail = str(cause).splitlines()[0][:200] if str(cause) else type(cause).__name__
    return f"{path.name}: cannot read it as {fmt} ({detail})"


def _rows(dataset, where: str, columns: dict[str, str], option: str) -> list[dict[str, Any]]:
    have = list(dataset.column_names)
    for field, column in columns.items():
        if column not in have:
            raise ConfigError(f"{option}: {where} has no column {column!r} (mapped to {field}); its columns: "
                              f"{', '.join(have) or '(none)'}")
    # every column reaches the rewards, as in TRL (`solution` needs no mapping); a mapped one under its field's name
    renamed = set(columns.values())
    mapping = {name: name for name in have if name not in renamed or name in columns}
    mapping.update(columns)
    if "prompt" not in mapping:
        raise ConfigError(f"{option}: {where} has no column 'prompt'; its columns: {', '.join(have) or '(none)'}; "
                          "map one with --columns prompt=NAME")
    if len(dataset) == 0:
        raise ConfigError(f"{option}: {where} has no rows")
    data = dataset.select_columns(sorted(set(mapping.values()))).to_dict()
    rows = []
    for i in range(len(dataset)):
        number = i + 1
        row: dict[str, Any] = {}
        for field, column in mapping.items():
            row[field] = _check(field, data[column][i], f"{where}, row {number}, column {column!r}"
                                + ("" if field == column else f" ({field})"), option)
        row["prompt_id"] = str(row.pop("id")) if row.get("id") is not None else str(number)
        rows.append(row)
    return rows


def _check(field: str, value: Any, at: str, option: str) -> Any:
    """The value of `field`, normalised; a ConfigError saying what is wrong where."""
    def bad(what: str) -> ConfigError:
        return ConfigError(f"{option}: {at}: {what}")

    if field == "prompt":
        if value is None or (isinstance(value, str) and not value.strip()):
            raise bad("empty prompt")
        if len(str(value)) > MAX_PROMPT_CHARS:
            raise bad(f"prompt of {len(str(value))} characters; at most {MAX_PROMPT_CHARS}")
        if isinstance(value, list):  # conversational: [{"role": ..., "content": ...}, ...]
            if not value or not all(isinstance(m, dict) and isinstance(m.get("role"), str)
                                    and isinstance(m.get("content"), str) for m in value):
                raise bad("a message-list prompt must be a non-empty list of {role, content} objects with text")
            return [{"role": m["role"], "content": m["content"]} for m in value]
        if not isinstance(value, str):
            raise bad(f"must be text (or a list of messages), got {type(value).__name__} {_short(value)}")
        return value
    if value is None or (isinstance(value, float) and value != value):  # missing or NaN (an empty CSV cell)
        return None
    if field == "answer":
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise bad(f"must be text or a number, got {type(value).__name__} {_short(value)}")
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return str(value)
    if field == "tests":
        if isinstance(value, str) or (isinstance(value, list) and all(isinstance(t, str) for t in value)):
            return value
        raise bad(f"must be text or a list of texts, got {type(value).__name__} {_short(value)}")
    if field == "system":
        if not isinstance(value, str):
            raise bad(f"must be text, got {type(value).__name__} {_short(value)}")
        return value
    if field == "id":
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return value
        raise bad(f"must be text or an integer, got {type(value).__name__} {_short(value)}")
    return value  # other mapped columns pass through to the rewards untouched


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# The reference answer under the names other trainers' rewards read it (docs/run-directory.md, `answer`):
# a rescore of an imported run passes it under its source's name too.
ANSWER_ALIASES = {"trl": "solution", "verl": "ground_truth"}
# A dataset row's reference answer, by the names datasets give it: the first one the row holds.
REFERENCE_COLUMNS = ("answer", *ANSWER_ALIASES.values())


def build_tasks(cfg: Config) -> tuple[Task, Task | None]:
    """(training task, held-out task or None); every row checked, so bad data fails here, before the run dir."""
    if cfg.task in BUILTIN_TASKS:
        if cfg.columns:
            raise ConfigError(f"columns: built-in task {cfg.task!r} has fixed columns; columns is for datasets")
        task = (big_arithmetic(seed=cfg.seed) if cfg.task == "big_arithmetic" else
                (arithmetic if cfg.task == "arithmetic" else word_problems)(cfg.task_max_operand))
    else:
        task = Task(cfg.task, load_task_rows(cfg.task, cfg.columns, cfg.dataset_config, cfg.dataset_split))
    held_out = None
    if cfg.eval_split:
        if is_data_file(cfg.eval_split):
            rows = load_task_rows(cfg.eval_split, cfg.columns, option="eval_split")
        elif cfg.task in BUILTIN_TASKS or is_data_file(cfg.task):
            raise ConfigError(f"eval_split: {cfg.task!r} has no named splits; give a prompt file or use eval_fraction")
        else:
            rows = load_task_rows(cfg.task, cfg.columns, cfg.dataset_config, cfg.eval_split, option="eval_split")
        held_out = Task(f"{task.name} [{cfg.eval_split}]", rows, system=task.system)
    elif cfg.eval_fraction:
        task, held_out = task.split(cfg.eval_fraction, cfg.seed)
    for option, t in (("task", task), ("eval_split", held_out)):
        for name in cfg.rewards:
            column = cfg.reward_params.get(name, {}).get("column", READS_COLUMN.get(name))
            if t is not None and column and not any(column in row for row in t.rows):
                raise ConfigError(f"{option}: {t.name} has no {column!r} column, which the {name} reward reads; "
                                  f"map one with --columns {column}=NAME")
    return task, held_out
