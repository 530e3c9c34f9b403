"""Reward model: a tiny sequence classifier built from a config, loaded from a directory."""

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from grpo_lab import rewards  # noqa: E402
from grpo_lab.rewards.reward_model import format_inputs  # noqa: E402

pytestmark = pytest.mark.timeout(300)
WORDS = "the answer is good bad 0 1 2 3 4 5 6 7 8 9 + = ? user assistant".split()
TEMPLATE = "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} {% endfor %}"


def save_tiny_reward_model(directory, chat_template=None, num_labels=1):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForSequenceClassification, PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[EOS]"] + WORDS)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]", eos_token="[EOS]"
    )
    if chat_template:
        tokenizer.chat_template = chat_template
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128,
        num_labels=num_labels, pad_token_id=vocab["[PAD]"],
    )
    LlamaForSequenceClassification(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return str(directory)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_tiny_reward_model(tmp_path_factory.mktemp("tiny_rm"))


def test_scores_are_one_float_per_sample_and_do_not_depend_on_batching(model_dir):
    prompts = ["1 + 2 =", "1 + 2 =", "the answer ?", "3 + 4 ="]
    completions = ["3", "the answer is 3 good good good", "bad", "7"]
    batched = rewards.build("reward_model", model=model_dir, batch_size=3, device="cpu")
    scores = batched(prompts, completions, answer=["3", "3", "x", "7"])
    assert len(scores) == 4 and all(isinstance(s, float) for s in scores)
    one_by_one = [batched([p], [c])[0] for p, c in zip(prompts, completions)]
    assert scores == pytest.approx(one_by_one, abs=1e-5)  # padding does not leak into the score
    assert len(set(round(s, 6) for s in scores)) > 1  # the prompt + completion reach the model


def test_long_inputs_are_truncated_keeping_the_completion(model_dir):
    fn = rewards.build("reward_model", model=model_dir, max_length=8)
    # Both inputs end in the same 8 tokens: "the" x 6, "good", "7". Truncating from the left
    # keeps the completion, so the scores match; cutting the right end would lose it.
    long, short = fn(["the " * 200, "the " * 6], ["good 7", "good 7"])
    assert long == pytest.approx(short, abs=1e-6)
    assert fn(["the " * 6], ["bad 7"])[0] != pytest.approx(short, abs=1e-6)


def test_chat_template_is_used_when_the_tokenizer_has_one(tmp_path):
    directory = save_tiny_reward_model(tmp_path, chat_template=TEMPLATE)
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    texts = format_inputs(tokenizer, ["1 + 2 ="], ["3"], templated=True)
    assert texts == ["user : 1 + 2 = assistant : 3 "]
    conversational = format_inputs(
        tokenizer,
        [[{"role": "user", "content": "1 + 2 ="}]],
        [[{"role": "assistant", "content": "3"}]],
        True,
    )
    assert conversational == texts
    fn = rewards.build("reward_model", model=directory)
    plain = rewards.build("reward_model", model=directory, chat_template=False)
    assert fn(["1 + 2 ="], ["3"]) != plain(["1 + 2 ="], ["3"])


def test_label_selects_the_logit(tmp_path):
    directory = save_tiny_reward_model(tmp_path, num_labels=2)
    first = rewards.build("reward_model", model=directory, label=0)(["1 +"], ["2"])
    second = rewards.build("reward_model", model=directory, label=1)(["1 +"], ["2"])
    assert first != second
    with pytest.raises(ValueError, match="label 2 out of range"):
        rewards.build("reward_model", model=directory, label=2)


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no such directory"):
        rewards.build("reward_model", model=str(tmp_path / "nope"))
    with pytest.raises(ValueError, match="cannot load"):
        rewards.build("reward_model", model=str(tmp_path))  # a directory without a model


def test_offline_hub_id_is_a_clear_one_line_error():
    # A subprocess: huggingface_hub reads HF_HUB_OFFLINE when it is first imported.
    code = (
        "from grpo_lab import rewards\n"
        "try:\n    rewards.build('reward_model', model='some-org/some-reward-model')\n"
        "except ValueError as e:\n    print('ERROR', e)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, timeout=240
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("ERROR")]
    assert len(lines) == 1, done.stdout + done.stderr
    assert "'some-org/some-reward-model' is not a local directory" in lines[0]
    assert "Hugging Face Hub" in lines[0]
