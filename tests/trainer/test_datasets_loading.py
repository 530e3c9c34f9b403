"""Prompt datasets: local files through `datasets`, the column mapping, held-out prompts, bad data.

Bad data must stop the run before its directory exists, with one line naming the file, the row
(1-based, header not counted) and the column.
"""

import json
import math
import os
import subprocess

import pandas as pd
import pytest

from grpo_lab.rundir import metrics
from grpo_lab.trainer.config import ConfigError, from_dict
from grpo_lab.trainer.data import load_task_rows
from grpo_lab.trainer.data import build_tasks
from grpo_lab.trainer.tasks import arithmetic, word_problems
from trainer_helpers import ROOT, SMALL, read_table, run_trainer, trainer_cmd


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


QUESTIONS = [{"q": f"{a}+{b}=", "sol": a + b, "level": a % 2} for a in range(4) for b in range(4)]


def cfg(tmp_path, **values):
    return from_dict({"runs_dir": str(tmp_path / "runs"), "name": "r", **values})


# --- the column mapping ---

def test_jsonl_with_a_column_mapping(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", QUESTIONS)
    rows = load_task_rows(str(path), {"prompt": "q", "answer": "sol", "difficulty": "level"})
    assert len(rows) == 16
    # numbers become text for the verifier; unmapped columns are dropped, extra mapped ones pass through
    assert rows[5] == {"prompt": "1+1=", "answer": "2", "difficulty": 1, "prompt_id": "6"}


def test_default_names_need_no_mapping_and_an_id_column_names_the_prompt(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": "q-a", "prompt": "Say 7.", "answer": 7, "system": "Be brief."}])
    assert load_task_rows(str(path), {}) == [{"prompt": "Say 7.", "answer": "7", "system": "Be brief.",
                                              "prompt_id": "q-a"}]


def test_csv_and_parquet_read_the_same_rows(tmp_path):
    frame = pd.DataFrame({"question": ["2+2=", "3+3="], "answer": [4, 6], "tests": ["assert True", None]})
    frame.to_csv(tmp_path / "p.csv", index=False)
    frame.to_parquet(tmp_path / "p.parquet")
    expected = [{"prompt": "2+2=", "answer": "4", "tests": "assert True", "prompt_id": "1"},
                {"prompt": "3+3=", "answer": "6", "tests": None, "prompt_id": "2"}]
    for name in ("p.csv", "p.parquet"):
        assert load_task_rows(str(tmp_path / name), {"prompt": "question"}) == expected


def test_message_list_prompts_are_kept_as_messages(tmp_path):
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    path = write_jsonl(tmp_path / "c.jsonl", [{"prompt": chat, "answer": "4"}])
    assert load_task_rows(str(path), {})[0]["prompt"] == chat


def test_a_saved_dataset_directory_gives_train_and_eval_splits(tmp_path):
    import datasets

    data = datasets.DatasetDict({
        "train": datasets.Dataset.from_list([{"question": f"{i}+1=", "answer": str(i + 1)} for i in range(6)]),
        "test": datasets.Dataset.from_list([{"question": "9+1=", "answer": "10"}]),
    })
    data.save_to_disk(str(tmp_path / "ds"))
    train, held = build_tasks(cfg(tmp_path, task=str(tmp_path / "ds"), columns={"prompt": "question"},
                                  eval_split="test"))
    assert [r["prompt"] for r in train.rows] == [f"{i}+1=" for i in range(6)]
    assert held.rows == [{"prompt": "9+1=", "answer": "10", "prompt_id": "1"}]


# --- held-out prompts ---

def test_eval_fraction_holds_out_a_fixed_disjoint_part(tmp_path):
    train, held = build_tasks(cfg(tmp_path, eval_fraction=0.25))  # arithmetic 0..5: 36 prompts
    again = build_tasks(cfg(tmp_path, eval_fraction=0.25))[1]
    assert len(held.rows) == 9 and len(train.rows) == 27
    assert {r["prompt_id"] for r in held.rows}.isdisjoint(r["prompt_id"] for r in train.rows)
    assert held.rows == again.rows  # same seed, same split: a resumed run evaluates the same prompts


def test_eval_split_file_for_a_file_task(tmp_path):
    train_path = write_jsonl(tmp_path / "train.jsonl", QUESTIONS[:10])
    eval_path = write_jsonl(tmp_path / "eval.jsonl", QUESTIONS[10:])
    _, held = build_tasks(cfg(tmp_path, task=str(train_path), eval_split=str(eval_path),
                              columns={"prompt": "q", "answer": "sol"}))
    assert [r["prompt"] for r in held.rows] == [q["q"] for q in QUESTIONS[10:]]


def test_eval_logging_writes_eval_curves_on_evaluation_steps(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", QUESTIONS)
    result = run_trainer(tmp_path / "runs", "ev", *SMALL, "--max-steps", "5", "--task", str(path),
                         "--columns", "prompt=q,answer=sol", "--eval-every", "2", "--eval-fraction", "0.25",
                         "--eval-prompts", "3", "--logging", "scalars")
    assert result.returncode == 0, result.stderr
    scalars = read_table(tmp_path / "runs" / "ev", "scalars").set_index("step")
    evaluated = scalars.index[scalars["eval/reward_mean"].notna()].tolist()
    assert evaluated == [1, 2, 4, 5]  # after step 1, every 2 steps, and the last step
    written = {c for c in scalars.columns if c not in ("time", "wall_s")}
    assert written == metrics.names("grpo", ["correctness"], evaluated=True)  # the registry's eval/* too
    for name in ("eval/accuracy", "eval/rewards/correctness/mean", "eval/completion/length_mean",
                 "eval/completion/truncated_frac", "eval/time_s"):
        assert scalars.loc[evaluated, name].notna().all(), name
        assert scalars.loc[3, name] != scalars.loc[3, name], name  # NaN between evaluations
    assert (scalars.loc[evaluated, "eval/prompts"] == 3).all()
    # correctness is the only reward with weight 1: the mean reward is the accuracy
    assert scalars.loc[evaluated, "eval/reward_mean"].tolist() == scalars.loc[evaluated, "eval/accuracy"].tolist()
    assert all(0 <= a <= 1 for a in scalars.loc[evaluated, "eval/accuracy"])



def test_eval_accuracy_is_checked_even_when_training_on_another_reward(tmp_path):
    result = run_trainer(tmp_path / "runs", "len", *SMALL, "--max-steps", "2", "--rewards", "length=1",
                         "--eval-every", "1", "--eval-fraction", "0.25", "--eval-prompts", "4", "--logging", "scalars")
    assert result.returncode == 0, result.stderr
    scalars = read_table(tmp_path / "runs" / "len", "scalars")
    assert "eval/rewards/correctness/mean" not in scalars  # not a training reward
    assert scalars["eval/accuracy"].between(0, 1).all() and scalars["eval/rewards/length/mean"].notna().all()


# --- built-in tasks ---

def test_arithmetic_is_unchanged():
    task = arithmetic(5)
    assert len(task.rows) == 36 and task.rows[9] == {"prompt_id": "1+3", "prompt": "1+3=", "answer": "4"}
    assert task.system == ""


def test_word_problems_answers_follow_the_story():
    task = word_problems(5)
    assert task.system and "Answer:" in task.system
    by_id = {r["prompt_id"]: r for r in task.rows}
    assert by_id["wp0-3-4"]["answer"] == "7" and "has 3" in by_id["wp0-3-4"]["prompt"]
    assert by_id["wp2-5-2"]["answer"] == "3" and "gave 2" in by_id["wp2-5-2"]["prompt"]
    assert by_id["wp4-3-4"]["answer"] == "12" and "3 bags with 4" in by_id["wp4-3-4"]["prompt"]
    assert all(int(r["answer"]) >= 0 for r in task.rows)
    assert len({r["prompt"] for r in task.rows}) == len(task.rows)


# --- bad data: file, row, column ---

@pytest.mark.parametrize("rows, columns, message", [
    ([{"q": "1+1="}, {"q": "2+2="}], {"prompt": "question"},
     "task: p.jsonl has no column 'question' (mapped to prompt); its columns: q"),
    ([{"text": "1+1=", "answer": 2}], {}, "task: p.jsonl has no column 'prompt'; its columns: text, answer"),
    ([{"prompt": "1+1=", "answer": 2}, {"prompt": "2+2=", "answer": 4}, {"prompt": "  ", "answer": 6}], {},
     "task: p.jsonl, row 3, column 'prompt': empty prompt"),
    ([{"q": "1+1=", "answer": 2}, {"q": None, "answer": 4}], {"prompt": "q"},
     "task: p.jsonl, row 2, column 'q' (prompt): empty prompt"),
    ([{"prompt": "1+1=", "answer": 2}, {"prompt": 5, "answer": 4}], {},
     "task: p.jsonl, row 2, column 'prompt': must be text (or a list of messages), got int 5"),
    ([{"prompt": "1+1=", "sol": [2]}], {"answer": "sol"},
     "task: p.jsonl, row 1, column 'sol' (answer): must be text or a number, got list [2]"),
    ([{"prompt": "1+1=", "answer": True}], {},
     "task: p.jsonl, row 1, column 'answer': must be text or a number, got bool True"),
    ([{"prompt": "x", "answer": "1", "tests": [1, 2]}], {},
     "task: p.jsonl, row 1, column 'tests': must be text or a list of texts, got list [1, 2]"),
    ([{"prompt": "x", "answer": "1", "system": 3}], {},
     "task: p.jsonl, row 1, column 'system': must be text, got int 3"),
    ([{"prompt": "x", "answer": "1"}, {"prompt": [{"role": "user"}], "answer": "1"}], {},
     "task: p.jsonl, row 2, column 'prompt': a message-list prompt must be"),
])
def test_bad_rows_name_file_row_and_column(tmp_path, rows, columns, message):
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    with pytest.raises(ConfigError) as err:
        load_task_rows(str(path), columns)
    assert str(err.value).startswith(message), str(err.value)


def test_invalid_json_line_is_named(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "a", "answer": 1}\n{"prompt": "b", "answer": 2}\n{"prompt": "c", answer: 3}\n')
    with pytest.raises(ConfigError, match=r"^task: p.jsonl, row 3: not valid JSON"):
        load_task_rows(str(path), {})


def test_empty_csv_cell_is_an_empty_prompt(tmp_path):
    (tmp_path / "p.csv").write_text("prompt,answer\n1+1=,2\n,4\n")
    with pytest.raises(ConfigError, match=r"^task: p.csv, row 2, column 'prompt': empty prompt$"):
        load_task_rows(str(tmp_path / "p.csv"), {})


def test_reward_column_the_data_lacks(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"prompt": "1+1="}])
    with pytest.raises(ConfigError, match=r"^task: .*p.jsonl has no 'answer' column, which the correctness reward "
                                          r"reads; map one with --columns answer=NAME$"):
        build_tasks(cfg(tmp_path, task=str(path)))


@pytest.mark.parametrize("values, message", [
    ({"task": "nowhere/p.jsonl"}, "task: no file at 'nowhere/p.jsonl'"),
    ({"task": "./no_such_dir"}, "task: no file or dataset directory at './no_such_dir'"),
    ({"columns": {"prompt": "q"}}, "columns: built-in task 'arithmetic' has fixed columns"),
    ({"eval_split": "test", "eval_every": 5}, "eval_split: 'arithmetic' has no named splits"),
])
def test_bad_task_options(tmp_path, values, message):
    with pytest.raises(ConfigError) as err:
        build_tasks(cfg(tmp_path, **values))
    assert str(err.value).startswith(message), str(err.value)


@pytest.mark.parametrize("values, field", [
    ({"eval_every": 5}, "eval_every"),
    ({"eval_fraction": 1.0}, "eval_fraction"),
    ({"eval_fraction": 0.1, "eval_split": "e.jsonl"}, "eval_fraction"),
    ({"eval_prompts": -1}, "eval_prompts"),
    ({"columns": "prompt"}, "columns"),
    ({"columns": {"prompt": 3}}, "columns"),
    ({"dataset_split": ""}, "dataset_split"),
])
def test_bad_data_options_are_config_errors(tmp_path, values, field):
    with pytest.raises(ConfigError, match=f"^{field}: "):
        cfg(tmp_path, **values)


def test_columns_parse_from_the_command_line():
    from grpo_lab.trainer.config import load_config

    c = load_config(["--columns", "prompt=question, answer=solution", "--name", "x"])
    assert c.columns == {"prompt": "question", "answer": "solution"}


def test_bad_data_from_the_cli_exits_2_before_the_run_dir(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"q": "1+1=", "a": 2}, {"q": "", "a": 4}])
    result = run_trainer(tmp_path / "runs", "bad", "--task", str(path), "--columns", "prompt=q,answer=a")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == ["error: task: p.jsonl, row 2, column 'q' (prompt): empty prompt"], result.stderr
    assert not (tmp_path / "runs" / "bad").exists()


def test_hub_dataset_offline_says_what_to_do(tmp_path):
    # offline mode fails at once; without it the hub client retries for about half a minute first
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    result = subprocess.run(trainer_cmd(tmp_path / "runs", "hub", "--task", "nobody-here/no-such-dataset"),
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("error: task: cannot load dataset 'nobody-here/no-such-dataset'"), line
    assert "save it as a .jsonl/.csv/.parquet file" in line
    assert not (tmp_path / "runs" / "hub").exists()


def test_nan_answers_score_none(tmp_path):
    (tmp_path / "p.csv").write_text("prompt,answer\n1+1=,2\n2+2=,\n")
    rows = load_task_rows(str(tmp_path / "p.csv"), {})
    assert rows[1]["answer"] is None and not any(isinstance(v, float) and math.isnan(v) for v in rows[1].values())


def test_an_unreachable_hub_means_cache_only_for_datasets(monkeypatch):
    # no HF_HUB_OFFLINE set: the trainer itself finds the hub unreachable and fails at once
    import datasets

    from grpo_lab.trainer.hub import hub_reachable

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")  # .invalid never resolves (RFC 2606)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", datasets.config.HF_HUB_OFFLINE)  # restored after
    assert not hub_reachable()
    with pytest.raises(ConfigError, match="OfflineModeIsEnabled"):
        load_task_rows("nobody-here/no-such-dataset", {})
