"""bench/gpu_vs_trl.py, the prepared GPU comparison, in what a CPU can check: the refusal without CUDA, equal
lengths for both trainers (an EOS no model can sample), the parameter counts its MFU figures divide by, and its
driver: notes written after every part, a failing part that part's outcome alone, a killed driver's notes kept,
--only, and a plan that fits one device call.
(The whole script at toy sizes: `bash bench/gpu_vs_trl.sh --smoke`, a few minutes: not a test.)"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import gpu_vs_trl  # noqa: E402 - bench/ is not a package


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is what a machine without CUDA gets")
def test_the_script_refuses_at_once_without_cuda():
    result = subprocess.run(["bash", str(ROOT / "bench" / "gpu_vs_trl.sh")], capture_output=True, text=True,
                            timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "no CUDA device" in result.stderr


def test_every_row_decodes_max_new_tokens_the_eos_is_outside_the_models_vocabulary(tmp_path):
    from grpo_lab.trainer.decode import Sampling, decode_with_logp

    model, tokenizer = gpu_vs_trl.build_model("toy", "cpu", torch.float32)
    assert tokenizer.eos_token_id == model.config.vocab_size == gpu_vs_trl.SHAPES["toy"]["vocab"]
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id
    rows = gpu_vs_trl.write_prompts(tmp_path / "p.jsonl", 8).read_text().splitlines()
    texts = [json.loads(line)["prompt"] for line in rows]
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    assert enc["attention_mask"].all()  # one length: no padding in either trainer
    out = decode_with_logp(model, enc["input_ids"], enc["attention_mask"], Sampling(2, 12), tokenizer.eos_token_id,
                           tokenizer.pad_token_id)
    assert out.tokens.shape == (16, 12) and (out.tokens < model.config.vocab_size).all()


@pytest.mark.parametrize("shape, published", [("135m", 134_515_008), ("0.5b", 494_032_768), ("1.5b", 1_543_714_304)])
def test_the_parameter_counts_are_the_models_own(shape, published):
    assert gpu_vs_trl.params_of(shape) == published  # SmolLM2-135M, Qwen2.5-0.5B and -1.5B, embeddings tied


@pytest.mark.parametrize("shape", ["toy", "toy-qwen"])
def test_the_parameter_count_matches_a_built_model(shape):
    model, _ = gpu_vs_trl.build_model(shape, "cpu", torch.float32)
    assert gpu_vs_trl.params_of(shape) == sum(p.numel() for p in model.parameters())


def emit(figures: dict, code: int = 0, err: str = "") -> list[str]:
    """A part's command: prints its RESULT line (and `err` on stderr), exits with `code`."""
    return [sys.executable, "-c", f"import sys; print('RESULT ' + {json.dumps(json.dumps(figures))}); "
                                  f"print({err!r}, file=sys.stderr); sys.exit({code})"]


RUN = {"step_s": [0.5, 0.4], "length": 8, "peak_gb": 1.0,
       "phases": {"generation": 0.2, "reward": 0.01, "old_logp+ref": 0.05, "update": 0.1, "other": 0.09}}


def test_a_failing_part_is_its_own_outcome_and_the_notes_hold_every_part_before_it(tmp_path):
    driver = gpu_vs_trl.Driver(120, tmp_path, dict(os.environ))
    on_disk = []  # the notes as the third part found them: written after each part, not at the end
    Part, known = gpu_vs_trl.Part, {"shape": "toy", "rows": 4, "tokens": 8}
    parts = [
        Part("setup", ("setup",), emit({"device": "cpu", "versions": {"torch": "x"}}), 30, 0, needed=True),
        Part("ours toy", ("runs", "ours toy"), emit(RUN), 30, 0, known=known),
        Part("trl toy", ("runs", "trl toy"), emit(RUN), 30, 0, known=known,
             read=lambda stdout: on_disk.append(json.loads((tmp_path / "gpu_vs_trl.json").read_text())) or 1 / 0),
        Part("decode", ("decode",), emit({}, code=3, err="CUDA error: an illegal memory access"), 30, 0),
        Part("probe ours toy", ("probes", "ours"), [sys.executable, "-c", "print('PROBE {\"tokens\": 8, "
                                                    "\"fits\": true, \"peak_gb\": 1.5, \"s\": 0.2}')"], 30, 0,
             read=gpu_vs_trl.probes_of, known={"shape": "toy", "rows": 4}),
    ]
    figures = {"smoke": True, "runs": {}, "probes": {}}
    driver.play(parts, figures)
    assert on_disk[0]["runs"]["ours toy"]["step_s"] == [0.5, 0.4] and "trl toy" not in on_disk[0]["runs"]
    saved = json.loads((tmp_path / "gpu_vs_trl.json").read_text())
    assert saved["runs"]["ours toy"] == {"outcome": "ok", **known, **RUN}
    assert saved["runs"]["trl toy"] == {"outcome": "ok; then ZeroDivisionError: division by zero", **known}
    assert saved["decode"] == {"outcome": "exit 3: CUDA error: an illegal memory access"}
    assert saved["probes"]["ours"]["outcome"] == "ok" and saved["probes"]["ours"]["results"][0]["fits"]
    notes = (tmp_path / "gpu_vs_trl.md").read_text()
    assert "| ours toy | ok | 4 x 8 | 0.450 | 71 |" in notes  # median of the timed steps; 32 tokens / 0.45 s
    assert "| trl toy | ok; then ZeroDivisionError" in notes and "largest rows x tokens that fit: 4 x 8" in notes


def test_after_a_failed_setup_the_parts_are_skipped_and_a_table_that_fails_leaves_the_json(tmp_path):
    driver = gpu_vs_trl.Driver(120, tmp_path, dict(os.environ))
    parts = [gpu_vs_trl.Part("setup", ("setup",), emit({}, code=1, err="no space left"), 30, 0, needed=True),
             gpu_vs_trl.Part("decode", ("decode",), emit({"never": 1}), 30, 0)]
    figures = {"smoke": True, "runs": {"ours toy": {"outcome": "ok", "step_s": ["?"]}}, "probes": {}}
    driver.play(parts, figures)
    saved = json.loads((tmp_path / "gpu_vs_trl.json").read_text())
    assert saved["setup"] == {"outcome": "exit 1: no space left"}
    assert saved["decode"] == {"outcome": "skipped (setup failed)"} and saved["runs"]["ours toy"]["step_s"] == ["?"]
    assert "the table failed" in (tmp_path / "gpu_vs_trl.md").read_text()


DRIVER = """
import sys
sys.path.insert(0, {bench!r})
from pathlib import Path
import gpu_vs_trl as g
out = Path({out!r})
parts = [g.Part("setup", ("setup",), {setup}, 30, 0, needed=True),
         g.Part("decode", ("decode",), [sys.executable, "-c",
                "import os, time; open({pid!r}, 'w').write(str(os.getpid())); time.sleep(120)"], 150, 0)]
try:
    g.Driver(200, out, {{}}).play(parts, {{"smoke": True, "runs": {{}}, "probes": {{}}}})
except g.Stopped:
    sys.exit(143)
"""


def test_a_killed_driver_leaves_the_notes_of_the_parts_it_finished(tmp_path):
    pid_file = tmp_path / "part.pid"
    script = DRIVER.format(bench=str(ROOT / "bench"), out=str(tmp_path), pid=str(pid_file),
                           setup=emit({"device": "cpu", "built toy s": 0.5}))
    driver = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while not pid_file.exists() and time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.2)
    assert pid_file.exists(), driver.stderr.read() if driver.poll() is not None else "the part never started"
    # what a SIGKILL would leave (the device's limit): the setup's notes, written before the part in flight
    assert json.loads((tmp_path / "gpu_vs_trl.json").read_text())["setup"] == {"outcome": "ok", "device": "cpu",
                                                                                "built toy s": 0.5}
    driver.send_signal(signal.SIGTERM)  # the shell's timeout: the part in flight is written as killed
    assert driver.wait(timeout=60) == 143
    saved = json.loads((tmp_path / "gpu_vs_trl.json").read_text())
    assert saved["decode"] == {"outcome": "killed (SIGTERM) while running"} and saved["setup"]["outcome"] == "ok"
    part = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # and its subprocess went with it
        os.kill(part, 0)


def test_only_runs_the_named_parts_after_a_setup_that_builds_their_models(tmp_path):
    def names(only):
        parts = gpu_vs_trl.plan_parts(gpu_vs_trl.GPU, ["me"], tmp_path, "cuda", "bfloat16", only)
        return [p.name for p in parts], parts[0].cmd[parts[0].cmd.index("--shapes") + 1]

    assert names([]) == (["setup", "decode", "ours 135m", "trl 135m", "trl 0.5b", "ours 0.5b", "probe ours 1.5b",
                          "probe trl 1.5b"], "135m,0.5b")
    assert names(["0.5b"]) == (["setup", "trl 0.5b", "ours 0.5b"], "0.5b")
    assert names(["probe"]) == (["setup", "probe ours 1.5b", "probe trl 1.5b"], "")  # the probe builds its own
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_vs_trl.py"), "--only", "ours 7b", "--out",
                             str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "names no part" in result.stderr
    assert not (tmp_path / "out").exists()


def test_the_plan_fits_one_device_call_with_room_for_the_set_up():
    """A device call runs 600 s at most: the driver's deadline, its grace in the shell's timeout, and the wheels,
    the preflight and a machine's first imports before it (a minute and more) must fit."""
    shell = (ROOT / "bench" / "gpu_vs_trl.sh").read_text()
    (limit,) = re.findall(r"exec timeout (\d+) ", shell)
    assert gpu_vs_trl.GPU["budget"] + 20 <= int(limit) <= 600 - 120
    order = [shell.index(s) for s in ("--target /tmp/site", 'PYTHONPATH="/tmp/site:', '"$PY" bench/gpu_preflight')]
    assert order == sorted(order)  # the wheels installed, put first on the path, then the versions and the cache API
