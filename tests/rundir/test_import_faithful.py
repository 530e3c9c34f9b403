"""Imports that keep what the source wrote: verl groups by uid or position (never by prompt
text), verl's extras and reference kept as columns; TRL's log_extra columns kept, the reward weights
read back from the run (or a one-line refusal naming --reward-weights), the model's name."""

import importlib
import json
import random
import shutil
from pathlib import Path

import pytest

from grpo_lab.rundir.reader import read_run
from grpo_lab.rundir.trl import RunDirCallback
from trainer_helpers import read_table
from trl_helpers import digits, run_trl

cli = importlib.import_module("grpo_lab.rundir.import")
A, B = "user: What is 2+2?\nassistant:", "user: What is 3+5?\nassistant:"


def verl_rows(uid: bool) -> list[dict]:
    """One step as verl's trainer batches it: prompt A drawn twice, B once, n = 4 responses each."""
    draws = [(A, [1, 1, 1, 0]), (B, [0, 1, 0, 1]), (A, [0, 0, 0, 1])]
    rows = []
    for d, (prompt, scores) in enumerate(draws):
        for k, score in enumerate(scores):
            row = {"input": prompt, "output": f"answer {d}.{k}", "gts": "4" if prompt == A else "8",
                   "score": float(score), "step": 1, "acc": bool(score), "pred": str(k)}
            if uid:
                row["uid"] = f"uid-{d}"
            rows.append(row)
    return rows


def write_dump(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True)
    (folder / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def imported(source: Path, runs: Path, name: str, *extra: str):
    assert cli.main([str(source), "--name", name, "--runs-dir", str(runs), *extra]) == 0
    return read_table(runs / name, "samples").sort_values(["group", "sample_idx"]).reset_index(drop=True)


@pytest.mark.parametrize("order", ["consecutive, no uid", "shuffled, with uid"])
def test_one_prompt_twice_in_a_step_is_two_groups_with_verls_advantages(tmp_path, order):
    rows = verl_rows(uid="uid" in order)
    if "shuffled" in order:
        random.Random(1).shuffle(rows)  # balance_batch's order: only the uid tells the groups
    samples = imported(write_dump(tmp_path / "dump", rows), tmp_path / "runs", "v")
    sizes = samples.groupby("group").size().tolist()
    assert sizes == [4, 4, 4]  # not one group of 8 for A
    for _, group in samples[samples["prompt"] == A].groupby("group"):
        by_score = dict(zip(group["reward"], group["advantage"]))
        # verl's GRPO: (r - mean) / (N-1 std); 1 1 1 0 -> 0.5 / -1.5 (merged into 8 rows: 0.723 / -1.266)
        assert by_score == pytest.approx({1.0: 0.5, 0.0: -1.5} if group["reward"].sum() == 3 else {0.0: -0.5, 1.0: 1.5},
                                         abs=1e-4)


def test_interleaved_rows_without_uid_are_refused_when_a_prompt_repeats(tmp_path, capsys):
    rows = verl_rows(uid=False)
    rows = rows[0::2] + rows[1::2]  # interleaved, no uid: A's 8 rows cannot be split into its two draws
    source = write_dump(tmp_path / "dump", rows)
    assert cli.main([str(source), "--name", "v", "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1.jsonl:1: this input has 8 responses, the others 4" in err, err
    assert not (tmp_path / "runs" / "v").exists()


def test_verl_extras_and_reference_are_kept(tmp_path):
    samples = imported(write_dump(tmp_path / "dump", verl_rows(uid=True)), tmp_path / "runs", "v")
    assert samples["extra/acc"].tolist() == samples["reward"].tolist()  # true/false as 1/0: a number
    assert samples["extra/pred"].tolist() == ["0", "1", "2", "3"] * 3  # text stays text
    assert (samples["answer"] == samples["extra/gts"]).all() and set(samples["answer"]) == {"4", "8"}
    assert "uid" not in " ".join(samples.columns)


# --- TRL ----------------------------------------------------------------------------------------


def correct_logged(prompts, completions, answer, log_extra=None, **kwargs):
    """correct (1 when the completion starts with the answer), logging why with TRL's log_extra."""
    scores = [1.0 if c.strip().startswith(a) else 0.0 for c, a in zip(completions, answer)]
    if log_extra is not None:
        log_extra("solution", list(answer))
        log_extra("first_char", [c[:1] for c in completions])
        log_extra("length", [float(len(c)) for c in completions])
    return scores


@pytest.fixture(scope="module")
def trl_out(tmp_path_factory):
    root = tmp_path_factory.mktemp("trl")
    run_trl(root, "out", callbacks=[RunDirCallback(root / "runs" / "live")], reward_funcs=(correct_logged, digits),
            reward_weights=[1.0, 0.5], eval_strategy="no", save_strategy="steps", save_steps=4)
    return root


def test_trl_weights_are_read_back_and_log_extra_columns_kept(trl_out, tmp_path):
    samples = imported(trl_out / "out", tmp_path, "t")
    info = read_run(tmp_path, "t")
    assert info.config["rewards"] == {"correct_logged": 1.0, "digits": 0.5}
    live = read_table(trl_out / "runs" / "live", "samples").sort_values(["step", "group", "sample_idx"])
    mine = samples.sort_values(["step", "group", "sample_idx"])
    assert mine["reward"].tolist() == pytest.approx(live["reward"].tolist(), nan_ok=True)  # TRL's weighted reward
    both = mine[["rewards/correct_logged", "rewards/digits"]].fillna(0.0)
    scored = mine["rewards/digits"].notna() | mine["rewards/correct_logged"].notna()
    assert mine["reward"][scored].tolist() == pytest.approx((both["rewards/correct_logged"] + 0.5 * both["rewards/digits"])[scored].tolist())
    assert mine["extra/solution"].tolist() == [str(int(p[0]) + int(p[2])) for p in mine["prompt"]]
    assert mine["extra/length"].dtype.kind == "f" and mine["extra/first_char"].map(type).eq(str).all()
    for column in ("extra/solution", "extra/first_char", "extra/length"):  # the live callback keeps them too
        assert live[column].tolist() == mine[column].tolist(), column
    assert info.config["model"] == "LlamaForCausalLM"  # from checkpoint-4/config.json, not "unknown"


def test_trl_model_name_comes_from_name_or_path(trl_out, tmp_path):
    source = tmp_path / "out"
    shutil.copytree(trl_out / "out", source)
    (source / "config.json").write_text(json.dumps({"_name_or_path": "HuggingFaceTB/SmolLM2-135M"}))
    imported(source, tmp_path / "runs", "t")
    assert read_run(tmp_path / "runs", "t").config["model"] == "HuggingFaceTB/SmolLM2-135M"


def test_trl_weights_that_cannot_be_read_back_are_asked_for(trl_out, tmp_path, capsys):
    no_state = tmp_path / "no-state"
    shutil.copytree(trl_out / "out" / "completions", no_state / "completions")
    tampered = tmp_path / "tampered"
    shutil.copytree(trl_out / "out", tampered)
    state_path = tampered / "checkpoint-4" / "trainer_state.json"
    state = json.loads(state_path.read_text())
    for k, record in enumerate(state["log_history"]):
        if "reward" in record:
            record["reward"] += 0.3 * (k + 1)  # no weights reproduce these
    state_path.write_text(json.dumps(state))
    for saved in tampered.rglob("training_args.bin"):  # the weights are inferred only where no GRPOConfig records them
        saved.unlink()
    runs = tmp_path / "runs"
    for source, extra, expected in (
            (no_state, [], "give the reward functions and their weights with --reward-weights"),
            (tampered, [], "--reward-weights correct_logged=1,digits=1"),
            (tampered, ["--reward-weights", "correct=1"], "expected a weight for each of the run's reward functions")):
        assert cli.main([str(source), "--name", "t", "--runs-dir", str(runs), *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected in err, err
    assert cli.main([str(tampered), "--name", "t", "--runs-dir", str(runs),
                     "--reward-weights", "correct_logged=2,digits=1"]) == 0  # given: used as given
    assert read_run(runs, "t").config["rewards"] == {"correct_logged": 2.0, "digits": 1.0}
