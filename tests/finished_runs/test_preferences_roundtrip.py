"""TRL's preference formats in and out unchanged: conversational rows keep their
roles, the implicit-prompt form (only chosen / rejected) is read as TRL reads it, and the export adds
no system message the data did not have. The rows are TRL's documented examples
(docs/source/dataset_formats.md, "Preference")."""

from __future__ import annotations

import json

import pytest

from grpo_lab.finished_runs import preferences
from grpo_lab.rundir import labels
from grpo_lab.rundir.chat import chat_turns
from grpo_lab.trainer.tiny import build_tokenizer
from labels_helpers import fake_run
from trainer_helpers import read_table

# TRL's documented preference examples, unchanged
STANDARD = {"prompt": "The sky is", "chosen": " blue.", "rejected": " green."}
STANDARD_IMPLICIT = {"chosen": "The sky is blue.", "rejected": "The sky is green."}
CONVERSATIONAL = {"prompt": [{"role": "user", "content": "What color is the sky?"}],
                  "chosen": [{"role": "assistant", "content": "It is blue."}],
                  "rejected": [{"role": "assistant", "content": "It is green."}]}
CONVERSATIONAL_IMPLICIT = {"chosen": [{"role": "user", "content": "What color is the sky?"},
                                      {"role": "assistant", "content": "It is blue."}],
                           "rejected": [{"role": "user", "content": "What color is the sky?"},
                                        {"role": "assistant", "content": "It is green."}]}
WITH_SYSTEM = {"prompt": [{"role": "system", "content": "Answer in three words."},
                          {"role": "user", "content": "What color is the sky?"}],
               "chosen": [{"role": "assistant", "content": "It is blue."}],
               "rejected": [{"role": "assistant", "content": "It is green."}]}
# SmolLM2-135M-Instruct's chat template: a default system message when the messages have none
SMOLLM2_TEMPLATE = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
                    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                    "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
                    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
                    "{% endif %}")


def round_trip(tmp_path, rows: list[dict]) -> tuple[list[dict], object]:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "runs" / "prefs"
    assert preferences.import_jsonl(run, source, "ann") == len(rows)
    out = tmp_path / "out.jsonl"
    preferences.export_jsonl([run], out)
    return [json.loads(line) for line in out.read_text().splitlines()], run


@pytest.mark.parametrize("row", [STANDARD, CONVERSATIONAL, WITH_SYSTEM], ids=["standard", "conversational", "system"])
def test_an_explicit_prompt_comes_back_as_it_went_in(tmp_path, row):
    back, run = round_trip(tmp_path, [row])
    assert back == [row]
    if isinstance(row["prompt"], list):  # the roles are kept in the run: the Groups page shows the turns
        prompt = read_table(run, "samples")["prompt"].iloc[0]
        assert chat_turns(prompt) == [(m["role"], m["content"]) for m in row["prompt"]]


def test_an_implicit_prompt_is_read_as_trls_extract_prompt_reads_it(tmp_path):
    from trl.data_utils import extract_prompt  # TRL's own reading of the form, for reference

    back, _ = round_trip(tmp_path, [STANDARD_IMPLICIT, CONVERSATIONAL_IMPLICIT])
    assert back == [extract_prompt(STANDARD_IMPLICIT), extract_prompt(CONVERSATIONAL_IMPLICIT)]
    assert back == [STANDARD, CONVERSATIONAL]


def test_rows_of_two_forms_are_refused_in_one_line(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps({"chosen": "x", "rejected": [{"role": "assistant", "content": "y"}]}) + "\n")
    with pytest.raises(labels.LabelError, match="^line 1: chosen and rejected must both be text or both messages$"):
        preferences.import_jsonl(tmp_path / "new", path, "ann")
    assert not (tmp_path / "new").exists()


def test_the_export_leaves_out_the_system_message_the_template_added(tmp_path):
    """A run of a model whose chat template adds SmolLM2's default system message: its logged prompts
    carry it, the data did not. A system message the run was given stays."""
    tokenizer = build_tokenizer()
    tokenizer.chat_template = SMOLLM2_TEMPLATE
    model = tmp_path / "chat-model"
    tokenizer.save_pretrained(model)
    question = [{"role": "user", "content": "What color is the sky?"}]
    rendered = tokenizer.apply_chat_template(question, tokenize=False, add_generation_prompt=True)
    assert "named SmolLM" in rendered  # the template's own, not the data's
    given = tokenizer.apply_chat_template([{"role": "system", "content": "Be brief."}, *question], tokenize=False,
                                          add_generation_prompt=True)
    run = fake_run(tmp_path, steps=1, groups=2, G=2, completion=lambda step, group, i: ["It is blue.", "Green."][i])
    samples = read_table(run, "samples")
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "model": str(model)}))
    from grpo_lab.rundir.layout import RunPaths
    from grpo_lab.rundir.writer import RunWriter

    rewritten = run.parent / "chat-run"
    writer = RunWriter(RunPaths(rewritten), flush_seconds=0)
    writer.log("samples", {**{k: samples[k].tolist() for k in samples.columns},
                           "prompt": [rendered if g == 0 else given for g in samples["group"]]})
    writer.close()
    for name in ("config.json", "status.json"):
        (rewritten / name).write_text((run / name).read_text())
    for group in (0, 1):
        labels.add(rewritten, step=1, group=group, sample=0, score=1, labeler="ann")
        labels.add(rewritten, step=1, group=group, sample=1, score=0, labeler="ann")
    out = tmp_path / "out.jsonl"
    assert preferences.export_jsonl([rewritten], out) == 2
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0] == {"prompt": question, "chosen": [{"role": "assistant", "content": "It is blue."}],
                       "rejected": [{"role": "assistant", "content": "Green."}]}
    assert rows[1]["prompt"] == [{"role": "system", "content": "Be brief."}, *question]
