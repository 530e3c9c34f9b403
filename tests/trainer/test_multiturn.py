"""Multi-turn rollouts: tool results spliced into the completion, masked out of the loss."""

from __future__ import annotations

import copy

import torch

from grpo_lab.tools import CHARACTER_CALC, calculator
from grpo_lab.tools.registry import template_tools
from grpo_lab.trainer import multiturn
from grpo_lab.trainer.decode import Sampling
from grpo_lab.objective.functions import grpo_loss
from grpo_lab.trainer.rollout import token_logprobs
from grpo_lab.trainer.batch import loss_mask

EOS = "</s>"


def scripted(monkeypatch, tokenizer, script):
    """Replace the sampler with one that writes `script(context text)` (EOS written as </s>), so a
    test knows what the model 'chose'; the multi-turn logic around it is the real one."""
    def decode(model, ids, mask, how, eos_id, pad_id):
        rows = []
        for row, keep in zip(ids, mask.bool()):
            text = script(tokenizer.decode(row[keep].tolist(), skip_special_tokens=True))
            body, _, rest = text.partition(EOS)
            toks = tokenizer(body, add_special_tokens=False)["input_ids"] + ([eos_id] if _ else [])
            rows.append(toks[:how.max_new_tokens])
        width = max(len(r) for r in rows)
        return torch.tensor([r + [pad_id] * (width - len(r)) for r in rows])
    monkeypatch.setattr(multiturn, "decode", decode)


def setup(**kw) -> multiturn.ToolSetup:
    return multiturn.ToolSetup(tools=kw.pop("tools", {"calculator": calculator}), tags=(CHARACTER_CALC,), **kw)


def run(model, tokenizer, prompts, setup_, max_new_tokens=40, copies=2):
    how = Sampling(copies=copies, max_new_tokens=max_new_tokens)
    return multiturn.sample_with_tools(model, tokenizer, prompts, how, torch.device("cpu"), setup_)


def test_the_tools_result_is_spliced_in_and_marked(model_and_tokenizer, monkeypatch):
    model, tokenizer = model_and_tokenizer
    # the text after the call ('99 junk') is what sampling on would have drawn: it is cut off
    scripted(monkeypatch, tokenizer, lambda ctx: " so ok" + EOS if "calc" in ctx else "calc 12345+67890=99 junk")
    r = run(model, tokenizer, ["1+2=", "12+3="], setup())
    assert r.completions == ["calc 12345+67890=80235 so ok"] * 4
    T = r.completion_mask.shape[1]
    start = len("calc 12345+67890=")
    want_tool = torch.zeros(T, dtype=torch.long)
    want_tool[start:start + 5] = 1  # the five characters of 80235
    assert all(torch.equal(row, want_tool) for row in r.tool_mask)
    assert r.completion_mask.sum(1).tolist() == [len("calc 12345+67890=80235 so ok") + 1] * 4  # and EOS
    assert not r.truncated.any()
    assert torch.equal(loss_mask(r), (r.completion_mask * (1 - r.tool_mask)).float())
    assert r.turns[0][0] | {"seconds": 0} == {"model": "calc 12345+67890=", "tool": "calculator",
                                              "arguments": {"": "12345+67890"}, "result": "80235",
                                              "seconds": 0, "error": None}
    assert r.turns[0][1] == {"model": " so ok"}
    # the layout rollout.sample gives: left-padded prompts, then the completion
    assert tokenizer.decode(r.input_ids[3, :r.prompt_len], skip_special_tokens=True) == "12+3="


def test_calls_past_max_tool_calls_stay_text(model_and_tokenizer, monkeypatch):
    model, tokenizer = model_and_tokenizer
    scripted(monkeypatch, tokenizer, lambda ctx: "calc 1+1=9" + EOS)
    r = run(model, tokenizer, ["1+2="], setup(max_tool_calls=2), copies=1)
    assert r.completions == ["calc 1+1=2calc 1+1=2calc 1+1=9"]
    assert [t.get("tool") for t in r.turns[0]] == ["calculator", "calculator", None]
    assert int(r.tool_mask.sum()) == 2


def test_the_token_budget_covers_tool_tokens(model_and_tokenizer, monkeypatch):
    model, tokenizer = model_and_tokenizer
    scripted(monkeypatch, tokenizer, lambda ctx: "calc 99999*99999=" + EOS)
    r = run(model, tokenizer, ["1+2="], setup(), max_new_tokens=20, copies=1)
    assert r.completions == ["calc 99999*99999=999"]  # 9999800001 cut to the 3 tokens left
    assert r.completion_mask.shape[1] == 20 and bool(r.truncated[0])
    assert r.tool_mask[0, -3:].tolist() == [1, 1, 1] and int(r.tool_mask.sum()) == 3


def test_a_failing_tool_gives_the_model_an_error_text(model_and_tokenizer, monkeypatch):
    model, tokenizer = model_and_tokenizer
    scripted(monkeypatch, tokenizer, lambda ctx: EOS if "calc" in ctx else "calc 9**9999=")
    r = run(model, tokenizer, ["1+2="], setup(), max_new_tokens=60, copies=1)
    assert r.turns[0][0]["error"] == "ValueError: exponent above 1000"
    assert r.completions[0].startswith("calc 9**9999=error")  # ':' is not in the vocabulary: <unk>, dropped


def test_an_environment_per_rollout_is_reset_with_its_row(model_and_tokenizer, monkeypatch):
    model, tokenizer = model_and_tokenizer

    class Offset:
        def reset(self, offset, **columns):
            self.offset = int(offset)

        def calculator(self, expression: str) -> str:
            """Add the row's offset."""
            return str(int(calculator(expression)) + self.offset)

    scripted(monkeypatch, tokenizer, lambda ctx: EOS if "calc" in ctx else "calc 1+1=")
    rows = [{"prompt": "1+2=", "prompt_id": 1, "offset": 10}, {"prompt": "2+2=", "prompt_id": 2, "offset": 20}]
    r = multiturn.sample_with_tools(model, tokenizer, ["1+2=", "2+2="], Sampling(copies=1, max_new_tokens=30),
                                    torch.device("cpu"), setup(tools={}, environment=Offset), rows)
    assert r.completions == ["calc 1+1=12", "calc 1+1=22"]


def test_real_sampling_without_calls_is_a_plain_rollout(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    torch.manual_seed(0)
    r = run(model, tokenizer, ["1+2=", "3+4="], setup(), max_new_tokens=8)
    assert r.input_ids.shape == (4, r.prompt_len + r.completion_mask.shape[1])
    assert r.completion_mask.shape == r.tool_mask.shape
    tool_rows = [i for i, t in enumerate(r.turns) if "tool" in t[0]]
    assert [i for i in range(4) if r.tool_mask[i].any()] == tool_rows
    assert ((r.tool_mask == 1) <= (r.completion_mask == 1)).all()


def test_the_loss_ignores_what_the_tool_said(model_and_tokenizer, monkeypatch):
    """Two rollouts whose model tokens agree and whose tool results differ: the same loss and
    the same gradient, and no gradient reaches a tool token."""
    model, tokenizer = model_and_tokenizer
    scripted(monkeypatch, tokenizer, lambda ctx: " done" + EOS if "calc" in ctx else "calc 12+30=")
    a = run(model, tokenizer, ["1+2="], setup(tools={"calculator": lambda expression: "42"}))
    b = run(model, tokenizer, ["1+2="], setup(tools={"calculator": lambda expression: "99"}))
    assert torch.equal(a.tool_mask, b.tool_mask) and a.completions != b.completions
    model_tokens = loss_mask(a).bool()
    assert torch.equal(a.completion_ids[model_tokens], b.completion_ids[model_tokens])
    with torch.no_grad():
        logp_a = token_logprobs(model, a)[0]
        logp_b = token_logprobs(model, b)[0]
    logp_b = torch.where(model_tokens, logp_a, logp_b)  # the model's own tokens scored alike
    assert not torch.equal(logp_a, logp_b)  # the tool tokens are not
    advantages = torch.tensor([1.0, 0.5])
    old_logp, ref_logp = logp_a - 0.05, logp_a + 0.1  # pi_old and the reference: the same in both

    def loss(logp, mask):
        logp = logp.clone().requires_grad_(True)
        out = grpo_loss(logp, old_logp, ref_logp, advantages, mask).loss
        out.backward()
        return out.detach(), logp.grad

    (loss_a, grad_a), (loss_b, grad_b) = loss(logp_a, loss_mask(a)), loss(logp_b, loss_mask(b))
    assert torch.equal(loss_a, loss_b) and torch.equal(grad_a, grad_b)
    assert (grad_a[a.tool_mask.bool()] == 0).all() and (grad_a[model_tokens] != 0).any()
    # the check can fail: with the completion mask alone, the tool's text would move the loss
    assert not torch.equal(loss(logp_a, a.completion_mask.float())[0], loss(logp_b, b.completion_mask.float())[0])


def test_a_chat_template_describes_the_tools_as_trl_passes_them(model_and_tokenizer):
    """render(tools=...) hands the functions to apply_chat_template, which reads their type hints
    and docstrings (transformers' get_json_schema); an environment's methods come bound (no self)."""
    from grpo_lab.trainer.tasks import Task, render

    _, tokenizer = model_and_tokenizer
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.chat_template = ("{% for t in tools or [] %}[{{ t.function.name }}({{ t.function.parameters.properties"
                               " | list | join(',') }}): {{ t.function.description }}]{% endfor %}"
                               "{% for m in messages %}{{ m.content }}{% endfor %}")

    class Env:
        def reset(self, **columns):
            pass

        def lookup(self, key: str) -> str:
            """Look a key up.

            Args:
                key: the key.
            """
            return key

    fns = template_tools(setup(environment=Env))
    text = render(Task("t", [{"prompt_id": 1, "prompt": "2+2="}]), tokenizer, "on", tools=fns).rows[0]["prompt"]
    assert text == ("[calculator(expression): Evaluate an arithmetic expression with + - * / // % ** and parentheses.]"
                    "[lookup(key): Look a key up.]2+2=")
    assert render(Task("t", [{"prompt_id": 1, "prompt": "2+2="}]), tokenizer, "on").rows[0]["prompt"] == "2+2="
