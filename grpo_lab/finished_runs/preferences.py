"""Ratings as preference pairs: for the reward model trainer, and to and from TRL's preference format.

A pair is two completions of one group (same step, same prompt) where people preferred one: by
rank (lower is better) or by score (higher is better), each completion's figure being the mean
over the labelers who rated it; ties give no pair. Only ratings whose `completion_sha` matches the
logged text count (docs/run-directory.md, "labels/").

TRL's `RewardTrainer` and `DPOTrainer` read rows `{"prompt", "chosen", "rejected"}`; when the run's
prompts were chat-formatted, the prompt is a list of messages and chosen / rejected each a list
with one assistant message (TRL's conversational form). A system message the model's chat
template adds by itself (SmolLM2's "You are a helpful AI assistant named SmolLM...") was not in
the data: the export leaves it out. The import takes both of TRL's forms, standard and
conversational (roles kept: the prompt is stored as a ChatML chat, read back turn by turn), with
an explicit prompt or an implicit one (rows of only chosen / rejected: the prompt is their
longest common start, as TRL's `extract_prompt` reads it).

`grpo-lab-labels export RUN_DIR OUT.jsonl` and `grpo-lab-labels import RUN_DIR IN.jsonl --labeler
NAME` (also `python -m grpo_lab.finished_runs.preferences`).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from itertools import combinations
from pathlib import Path

import pandas as pd

from grpo_lab.rundir import labels
from grpo_lab.rundir.chat import chat_turns
from grpo_lab.rundir.query import query

PAIR_COLUMNS = ["run", "step", "group", "prompt_id", "prompt", "chosen", "rejected", "source"]


def rated_completions(run_dir: str | Path) -> pd.DataFrame:
    """One row per rated completion: step, group, sample_idx, prompt_id, prompt, completion, and the
    mean `score` and `rank` over its labelers (NaN where none gave one), `labelers` who rated it."""
    run_dir = Path(run_dir)
    rated = labels.read(run_dir)
    if rated.empty:
        return pd.DataFrame(columns=["step", "group", "sample_idx", "prompt_id", "prompt", "completion", "score",
                                     "rank", "labelers"])
    texts, _ = query(run_dir, "samples", 'SELECT step, "group", sample_idx, prompt, completion FROM {src}')
    if texts.empty:
        texts = pd.DataFrame(columns=["step", "group", "sample_idx", "prompt", "completion"])
    texts = texts.astype({"step": "int64", "group": "int64", "sample_idx": "int64"})
    rated = rated.merge(texts, on=["step", "group", "sample_idx"], how="inner")
    rated = rated[rated["completion_sha"] == rated["completion"].map(labels.completion_sha)]
    rated = rated.assign(rank=rated["rank"].astype("float64"))
    return (rated.groupby(["step", "group", "sample_idx"], as_index=False)
            .agg(prompt_id=("prompt_id", "first"), prompt=("prompt", "first"), completion=("completion", "first"),
                 score=("score", "mean"), rank=("rank", "mean"), labelers=("labeler", "nunique")))


def pairs(run_dir: str | Path) -> pd.DataFrame:
    """Every preference pair of the run's ratings (PAIR_COLUMNS); `source` is "rank" or "score".
    A pair both sources give is kept once (rank first)."""
    rows = []
    for (step, group), g in rated_completions(run_dir).groupby(["step", "group"]):
        seen = set()
        for source, better in (("rank", lambda a, b: a < b), ("score", lambda a, b: a > b)):
            scored = g[g[source].notna()]
            for (_, a), (_, b) in combinations(scored.iterrows(), 2):
                if better(a[source], b[source]):
                    win, lose = a, b
                elif better(b[source], a[source]):
                    win, lose = b, a
                else:
                    continue
                key = (win["sample_idx"], lose["sample_idx"])
                if key in seen or win["completion"] == lose["completion"]:
                    continue
                seen.add(key)
                rows.append({"run": Path(run_dir).name, "step": int(step), "group": int(group),
                             "prompt_id": str(win["prompt_id"]), "prompt": str(win["prompt"]),
                             "chosen": str(win["completion"]), "rejected": str(lose["completion"]), "source": source})
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def agreement(run_dir: str | Path) -> pd.DataFrame:
    """For each two labelers: the completion pairs (same group) both ordered strictly by score, and
    the share they ordered the same way. Columns: labeler_a, labeler_b, pairs, agree (NaN: no pair).

    A figure for how far one person's ratings predict another's, the ceiling a reward model can reach."""
    df = labels.read(run_dir)
    df = df[df["score"].notna()]
    out = []
    people = sorted(df["labeler"].unique())
    for i, a in enumerate(people):
        for b in people[i + 1:]:
            both = df[df["labeler"] == a].merge(df[df["labeler"] == b], on=["step", "group", "sample_idx"])
            n = same = 0
            for _, g in both.groupby(["step", "group"]):
                for (_, x), (_, y) in combinations(g.iterrows(), 2):
                    da, db = x["score_x"] - y["score_x"], x["score_y"] - y["score_y"]
                    if da and db:
                        n += 1
                        same += (da > 0) == (db > 0)
            out.append({"labeler_a": a, "labeler_b": b, "pairs": n, "agree": same / n if n else float("nan")})
    return pd.DataFrame(out, columns=["labeler_a", "labeler_b", "pairs", "agree"])


def split_by_prompt(df: pd.DataFrame, fraction: float, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, held-out): the held-out pairs are those of a seeded `fraction` of the prompts, so no
    held-out prompt was seen in training.

    >>> df = pd.DataFrame({"prompt_id": list("aabbccddee"), "x": range(10)})
    >>> train, held = split_by_prompt(df, 0.2, seed=0)
    >>> len(held), set(held.prompt_id) & set(train.prompt_id)
    (2, set())
    """
    import random

    ids = sorted(df["prompt_id"].unique())
    random.Random(seed).shuffle(ids)
    n = max(1, round(len(ids) * fraction)) if fraction > 0 and len(ids) > 1 else 0
    held = set(ids[:n])
    mask = df["prompt_id"].isin(held)
    return df[~mask].reset_index(drop=True), df[mask].reset_index(drop=True)


# --- TRL's preference format -----------------------------------------------------------------------


def _conversation(prompt: str) -> list[dict] | None:
    turns = chat_turns(prompt)
    return [{"role": role, "content": content} for role, content in turns] or None


def _completion_messages(text: str) -> list[dict]:
    """A completion as TRL's conversational completion: one assistant message, or the messages of
    a completion imported with several (stored as a ChatML chat, as a prompt is)."""
    return _conversation(text) if text.startswith(CHATML_OPEN) else [{"role": "assistant", "content": text}]


def to_trl(df: pd.DataFrame, template_system: str | None = None) -> list[dict]:
    """Pairs as TRL preference rows; conversational where the logged prompt is a rendered chat.
    template_system: the system message the run's chat template adds when the data gives none
    (`default_system`), left out: it was not in the data."""
    out = []
    for r in df.itertuples():
        messages = _conversation(r.prompt)
        if messages is None:
            out.append({"prompt": r.prompt, "chosen": r.chosen, "rejected": r.rejected})
            continue
        if template_system is not None and messages[0] == {"role": "system", "content": template_system}:
            messages = messages[1:]
        out.append({"prompt": messages, "chosen": _completion_messages(r.chosen),
                    "rejected": _completion_messages(r.rejected)})
    return out


def default_system(run_dir: str | Path) -> str | None:
    """The system message the run's model's chat template writes when the messages have none
    (None: it writes none, or the run's tokenizer is not on this machine). A system message the
    run was given (config `system_prompt`) is data, never this."""
    from grpo_lab.rundir.layout import read_json  # noqa: PLC0415

    config = read_json(Path(run_dir) / "config.json") or {}
    model = config.get("model")
    if not isinstance(model, str) or not model or config.get("source") == "preferences":
        return None
    found = _template_system(model)
    return None if found is None or found == (config.get("system_prompt") or None) else found


@functools.lru_cache(maxsize=16)
def _template_system(model: str) -> str | None:
    try:
        from transformers import AutoTokenizer  # noqa: PLC0415 - only an export of a chat run needs it

        if model == "smollm2":  # the trainer's alias: its converted copy (trainer/smollm.py)
            from grpo_lab.trainer import smollm  # noqa: PLC0415

            model = str(smollm.cached_dir()) if smollm.is_cached() else model
        tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
        if not getattr(tokenizer, "chat_template", None):
            return None
        text = tokenizer.apply_chat_template([{"role": "user", "content": "probe"}], tokenize=False)
    except Exception:  # noqa: BLE001 - no tokenizer here (offline, a removed folder): nothing to leave out
        return None
    turns = chat_turns(text)
    return turns[0][1] if turns and turns[0][0] == "system" else None


def export_jsonl(run_dirs: list[str | Path], out: str | Path) -> int:
    """Write every run's pairs to `out` as TRL preference JSONL; returns the number of rows."""
    rows = [row for run in run_dirs for row in to_trl(pairs(run), default_system(run))]
    with open(out, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(rows)


CHATML_OPEN = "<|im_start|>"


def _is_messages(value) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in value)


def _text(value, field: str, line: int) -> str:
    """A prompt or completion in either TRL form, as the text a run logs: text as it is; messages
    as a ChatML chat (what a chat run logs, and what rundir.chat reads back turn by turn), except a
    completion of one assistant message, which is its text (as a chat run logs a completion)."""
    if isinstance(value, str):
        return value
    if _is_messages(value):
        if field != "prompt" and len(value) == 1 and value[0]["role"] == "assistant":
            return value[0]["content"]
        chat = "".join(f"{CHATML_OPEN}{m['role']}\n{m['content']}<|im_end|>\n" for m in value)
        return chat + (f"{CHATML_OPEN}assistant\n" if field == "prompt" else "")
    raise labels.LabelError(f"line {line}: {field} must be text or a list of messages with text content")


def split_implicit(chosen, rejected) -> tuple:
    """(prompt, chosen, rejected) of a row with an implicit prompt: the longest common start of
    chosen and rejected, whole messages for conversations; for text, cut before the space that
    starts the answers, as TRL's extract_prompt cuts it.

    >>> split_implicit("The sky is blue.", "The sky is green.")
    ('The sky is', ' blue.', ' green.')
    >>> q, a, b = [{"role": "user", "content": "Sky?"}], {"role": "assistant", "content": "Blue."}, {"role": "assistant", "content": "Green."}
    >>> split_implicit(q + [a], q + [b]) == (q, [a], [b])
    True
    """
    n = 0
    while n < min(len(chosen), len(rejected)) and chosen[n] == rejected[n]:
        n += 1
    if isinstance(chosen, str) and 0 < n < min(len(chosen), len(rejected)) and chosen[n - 1] == " ":
        n -= 1
    return chosen[:n], chosen[n:], rejected[n:]


def import_jsonl(run_dir: str | Path, path: str | Path, labeler: str) -> int:
    """A TRL preference JSONL (prompt, chosen, rejected; or only chosen and rejected, the prompt
    implicit) as a rated run: each row becomes one group of two completions at step 1, 2, ...
    (tables/samples written as a run of its own), the chosen one ranked 1 and scored 1, the rejected
    one ranked 2 and scored 0. `run_dir` must not exist yet. Returns the number of pairs imported."""
    from grpo_lab.rundir.layout import SCHEMA_VERSION, RunPaths, write_json_atomic  # noqa: PLC0415
    from grpo_lab.rundir.writer import RunWriter  # noqa: PLC0415

    run_dir = Path(run_dir)
    if run_dir.exists():
        raise labels.LabelError(f"run_dir: {str(run_dir)!r} exists; import into a new run directory")
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except ValueError:
                raise labels.LabelError(f"line {line}: not JSON") from None
            missing = [k for k in ("chosen", "rejected") if not isinstance(row, dict) or k not in row]
            if missing:
                raise labels.LabelError(f"line {line}: needs prompt, chosen and rejected (or chosen and rejected, "
                                        f"the prompt implicit); missing {', '.join(missing)}")
            if "prompt" in row:
                parts = (row["prompt"], row["chosen"], row["rejected"])
            elif isinstance(row["chosen"], type(row["rejected"])) and isinstance(row["chosen"], (str, list)):
                parts = split_implicit(row["chosen"], row["rejected"])
            else:
                raise labels.LabelError(f"line {line}: chosen and rejected must both be text or both messages")
            rows.append(tuple(_text(v, k, line) for k, v in zip(("prompt", "chosen", "rejected"), parts)))
    if not rows:
        raise labels.LabelError(f"path: {str(path)!r} has no preference rows")
    labels.check_labeler(labeler)  # checked before anything is written
    run_dir.mkdir(parents=True)
    writer = RunWriter(RunPaths(run_dir), flush_seconds=0)
    n = len(rows)
    writer.log("samples", {"step": [s for s in range(1, n + 1) for _ in (0, 1)], "group": [0] * (2 * n),
                           "sample_idx": [0, 1] * n, "prompt_id": [f"pair-{s}" for s in range(1, n + 1) for _ in (0, 1)],
                           "prompt": [p for p, _, _ in rows for _ in (0, 1)],
                           "completion": [c for _, chosen, rejected in rows for c in (chosen, rejected)]})
    writer.close()
    name = run_dir.name
    write_json_atomic(run_dir / "config.json", {"name": name, "algo": "grpo", "model": "", "task": str(path),
                                                "group_size": 2, "max_steps": n, "source": "preferences"})
    write_json_atomic(run_dir / "status.json", {"schema_version": SCHEMA_VERSION, "state": "finished", "step": n,
                                                "total_steps": n, "name": name, "algo": "grpo",
                                                "source": "preferences"})
    for step in range(1, n + 1):
        labels.add(run_dir, step=step, group=0, sample=0, score=1, rank=1, labeler=labeler)
        labels.add(run_dir, step=step, group=0, sample=1, score=0, rank=2, labeler=labeler)
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grpo-lab-labels", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    exp = sub.add_parser("export", help="ratings of runs -> TRL preference JSONL (prompt, chosen, rejected)")
    exp.add_argument("runs", nargs="+", help="run directories")
    exp.add_argument("--out", required=True, help="the JSONL file to write")
    imp = sub.add_parser("import", help="a TRL preference JSONL -> a new rated run directory")
    imp.add_argument("run", help="the run directory to create")
    imp.add_argument("path", help="the JSONL file to read")
    imp.add_argument("--labeler", default="import", help="the name the ratings carry (default: import)")
    args = parser.parse_args(argv)
    try:
        if args.command == "export":
            for run in args.runs:
                if not Path(run).is_dir():
                    raise labels.LabelError(f"runs: {run!r} is not a run directory")
            n = export_jsonl(args.runs, args.out)
            print(f"wrote {n} preference pairs to {args.out}")
        else:
            n = import_jsonl(args.run, args.path, args.labeler)
            print(f"imported {n} preference pairs into {args.run}")
    except (labels.LabelError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
