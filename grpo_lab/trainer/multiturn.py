"""Multi-turn rollouts: the model samples, calls a tool, reads its result, and goes on.

A round samples every unfinished row (decode.py's loop, one copy each) and cuts each row's new
tokens at the first of: its EOS, the end of its first complete tool call (grpo_lab/tools/parsing.py),
or the completion's token budget. Cutting after the fact samples exactly what stopping there
would: each token is drawn given only the tokens before it. A row that closed a call gets the
tool's result appended as tokens, then the next round continues it. A row ends at its EOS or when
`max_new_tokens` (over the whole completion, tool tokens included) runs out; after
`max_tool_calls` calls its calls are no longer run (their text stays text), so it can still answer.
With an environment class, each row's instance travels on the rollout to the rewards (TRL's
`environments` keyword), so a reward can read the state its rollout left.

The tool's tokens are context, not policy: `Rollout.tool_mask` marks them and the loss mask
(batch.loss_mask) drops them, so they get no log-prob ratio, KL or loss, as in TRL and verl.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from grpo_lab.tools import (CHARACTER_CALC, XML_CALC, TagSyntax, environment_tools, find_call,
                            run_call)
from grpo_lab.tools import environments
from grpo_lab.tools.runner import DEFAULT_MAX_CHARS, DEFAULT_TIMEOUT_S
from grpo_lab.trainer import environment_setup
from grpo_lab.trainer.decode import Sampling, decode
from grpo_lab.trainer.models import unwrap
from grpo_lab.trainer.rollout import Rollout

if TYPE_CHECKING:  # the type alone: Components is built by run.py's prepare
    from grpo_lab.trainer.components import Components


@dataclass(frozen=True)
class ToolSetup:
    """What a multi-turn rollout may call: shared functions, and/or an environment class
    (a fresh instance per rollout, reset with its row's columns)."""

    tools: dict[str, Callable]
    environment: type | None = None
    tags: tuple[TagSyntax, ...] = (XML_CALC,)
    max_tool_calls: int = 4
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_chars: int = DEFAULT_MAX_CHARS
    prompter: Callable | None = None  # renders a prompt with reset's observation (tools/environments.py)

    def for_row(self, row: dict | None) -> tuple[dict[str, Callable], object | None]:
        """The tools one rollout may call, and its environment instance (None without a class)."""
        if self.environment is None:
            return self.tools, None
        env = environments.start(self.environment, row or {}, (row or {}).get("prompt", ""), self.prompter).environment
        return self.tools | environment_tools(env), env


def tags_for(tokenizer) -> tuple[TagSyntax, ...]:
    """The tag form a tokenizer can write: `<calc>..</calc>`, or `calc ..=` for the built-in
    character model, which has no `<` in its vocabulary."""
    unk = tokenizer.unk_token_id
    ids = tokenizer("<calc>", add_special_tokens=False)["input_ids"]
    return (CHARACTER_CALC,) if unk is not None and unk in ids else (XML_CALC,)


def _call_cut(tokenizer, tokens: list[int], tags) -> int | None:
    """The fewest leading tokens whose text holds a complete tool call, or None.
    A closed call stays closed as tokens are added, so a binary search finds the cut."""
    text = lambda n: tokenizer.decode(tokens[:n], skip_special_tokens=True)  # noqa: E731
    if not tokens or find_call(text(len(tokens)), tags) is None:
        return None
    low, high = 1, len(tokens)
    while low < high:
        mid = (low + high) // 2
        if find_call(text(mid), tags) is None:
            low = mid + 1
        else:
            high = mid
    return low


def _left_pad(rows: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.tensor([[pad_id] * (width - len(r)) + r for r in rows], dtype=torch.long, device=device)
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], dtype=torch.long, device=device)
    return ids, mask


def result_text(call_is_json: bool, text: str) -> str:
    """How a result is written into the completion: a tag call's result follows it as is
    ("calc 2+3=" then "5"); a JSON call's in a <tool_response> block, as Qwen/Hermes templates do."""
    return f"\n<tool_response>\n{text}\n</tool_response>\n" if call_is_json else text


def sample_with_tools(model, tokenizer, prompts: list[str], how: Sampling, device: torch.device,
                      setup: ToolSetup, rows: list[dict] | None = None) -> Rollout:
    """`how.copies` (G) multi-turn completions per prompt, laid out as rollout.sample lays them
    out (prompt i's completions are rows i*G .. i*G+G-1), with `tool_mask` and `turns`."""
    start = time.perf_counter()
    G, budget, eos, pad = how.copies, how.max_new_tokens, tokenizer.eos_token_id, tokenizer.pad_token_id
    # a text per rollout: an environment's reset may append an observation to its prompt, as in TRL
    texts, toolboxes, rollout_envs = environment_setup.start_rollouts(setup, rows, prompts, G)
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    prompt_ids, prompt_mask = enc["input_ids"], enc["attention_mask"]
    B = len(prompt_ids)
    contexts = [ids[m.bool()].tolist() for ids, m in zip(prompt_ids, prompt_mask)]
    tokens: list[list[int]] = [[] for _ in range(B)]
    from_tool: list[list[int]] = [[] for _ in range(B)]
    turns: list[list[dict]] = [[] for _ in range(B)]
    calls, ended, done = [0] * B, [False] * B, [False] * B
    # eager: each round decodes another width and length, where a static cache (and a CUDA graph) would be rebuilt
    one = replace(how, copies=1, decode="eager")
    while not all(done):
        active = [i for i in range(B) if not done[i]]
        ids, mask = _left_pad([contexts[i] + tokens[i] for i in active], pad, device)
        room = max(budget - len(tokens[i]) for i in active)
        new = decode(unwrap(model), ids, mask, replace(one, max_new_tokens=room), eos_id=eos, pad_id=pad).tolist()
        for row, i in zip(new, active):
            segment = row[:budget - len(tokens[i])]
            if eos in segment:
                segment = segment[:segment.index(eos) + 1]
            cut = _call_cut(tokenizer, segment, setup.tags) if calls[i] < setup.max_tool_calls else None
            segment = segment[:cut] if cut else segment
            tokens[i] += segment
            from_tool[i] += [0] * len(segment)
            turn = {"model": tokenizer.decode(segment, skip_special_tokens=True)}
            turns[i].append(turn)
            ended[i] = bool(segment) and segment[-1] == eos
            if cut is None:
                done[i] = True  # an answer without a call, or the budget spent
                continue
            calls[i] += 1
            call = find_call(turn["model"], setup.tags)
            result = run_call(call, toolboxes[i], setup.timeout_s, setup.max_chars)
            turn |= {"tool": call.name, "arguments": call.arguments, "result": result.text,
                     "seconds": round(result.seconds, 4), "error": result.error}
            result_ids = tokenizer(result_text("" not in call.arguments, result.text),
                                   add_special_tokens=False)["input_ids"][:budget - len(tokens[i])]
            tokens[i] += result_ids
            from_tool[i] += [1] * len(result_ids)
            done[i] = len(tokens[i]) >= budget
    T = max(1, max(len(t) for t in tokens))
    completion = torch.tensor([t + [pad] * (T - len(t)) for t in tokens], dtype=torch.long)
    completion_mask = torch.tensor([[1] * len(t) + [0] * (T - len(t)) for t in tokens], dtype=torch.long)
    tool_mask = torch.tensor([f + [0] * (T - len(f)) for f in from_tool], dtype=torch.long)
    texts = [tokenizer.decode(t, skip_special_tokens=True) for t in tokens]
    return Rollout(input_ids=torch.cat([prompt_ids, completion], dim=1).to(device),
                   attention_mask=torch.cat([prompt_mask, completion_mask], dim=1).to(device),
                   prompt_len=prompt_ids.shape[1], completion_mask=completion_mask.to(device),
                   truncated=torch.tensor([not e for e in ended], device=device), completions=texts,
                   generation_s=time.perf_counter() - start, tool_mask=tool_mask.to(device), turns=turns,
                   environments=rollout_envs)


def build_setup(cfg, tokenizer) -> ToolSetup | None:
    """The run's ToolSetup from its config (tools, environment, max_tool_calls, tool_timeout_s),
    or None without tools; a spec that does not load is a ConfigError naming the option."""
    from grpo_lab.tools import ToolError, load_environment, load_tools  # noqa: PLC0415
    from grpo_lab.trainer.config import ConfigError  # noqa: PLC0415

    if not (cfg.tools or cfg.environment):
        return None
    try:
        tools = load_tools(cfg.tools)
        environment = load_environment(cfg.environment) if cfg.environment else None
    except ToolError as exc:
        raise ConfigError(str(exc)) from None
    tags = tags_for(tokenizer) if tokenizer is not None else (XML_CALC,)  # None: only checking the specs load
    return ToolSetup(tools, environment, tags, cfg.max_tool_calls, cfg.tool_timeout_s)


def setup_for(c: Components) -> ToolSetup | None:
    """The trainer components' ToolSetup, built on first use and kept on them."""
    if not hasattr(c, "tool_setup"):
        c.tool_setup = environment_setup.with_prompter(build_setup(c.cfg, c.tokenizer), c)
    return c.tool_setup
