"""Prompt sources. A task yields rows: a `prompt` plus columns the rewards read (e.g. `answer`).

Built in: small-number addition ('arithmetic', the tiny model's task), generated arithmetic
word problems ('word_problems', for instruct models) and 3-digit sums ('big_arithmetic', for
the calculator tool); all are scored by the correctness reward.
Dataset files and hub datasets become tasks in grpo_lab/trainer/data.py. `render` turns each row's prompt
into the exact text the model sees (system prompt, chat template).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

from grpo_lab.trainer.config import ConfigError


@dataclass(frozen=True)
class Task:
    name: str
    rows: list[dict[str, Any]]  # each: prompt_id, prompt, and reward columns (optionally `system`)
    system: str = ""  # the task's default system prompt

    def batch(self, step: int, n: int, seed: int) -> list[dict[str, Any]]:
        """The prompts of step `step` (from 1): epochs of seeded shuffles, drawn without replacement.

        While the task has at least n prompts, a step takes n distinct ones: epoch e is a shuffle
        of all rows cut into len(rows) // n steps (the few left over wait for a later epoch, as a
        data loader's drop_last). With fewer rows than n, a step repeats prompts, each copy its own
        group. A function of (seed, step) only, so a resumed run draws exactly the same prompts.
        """
        N = len(self.rows)
        if n <= N:
            steps_per_epoch = N // n
            epoch, k = divmod(step - 1, steps_per_epoch)
            order = self._shuffle(seed, epoch)
            return [self.rows[i] for i in order[k * n:(k + 1) * n]]
        order = [i for block in range(-(-n // N)) for i in self._shuffle(seed, (step, block))]
        return [self.rows[i] for i in order[:n]]

    def _shuffle(self, seed: int, key: Any) -> list[int]:
        order = list(range(len(self.rows)))
        random.Random(f"{seed}/{key}").shuffle(order)  # str seeds hash stably (sha512), unlike tuples
        return order

    def sft_pairs(self, seed: int, n: int, answers_correct: bool) -> list[tuple[str, str]]:
        """(prompt, completion) pairs for the warm start.

        With answers_correct False the completions are random answers: the model learns the
        format (a number, then stop) but not the arithmetic; RL must teach that.
        """
        rng = random.Random(seed)
        rows = [row for row in self.rows if row.get("answer") is not None]
        # (length, text) orders whole numbers numerically and any other answer too
        answers = sorted({str(row["answer"]) for row in rows}, key=lambda a: (len(a), a))
        pairs = []
        for _ in range(n):
            row = rows[rng.randrange(len(rows))]
            pairs.append((row["prompt"], row["answer"] if answers_correct else rng.choice(answers)))
        return pairs

    def split(self, fraction: float, seed: int) -> tuple["Task", "Task"]:
        """(train, held out): a seeded shuffle sets aside `fraction` of the rows (at least one each)."""
        if len(self.rows) < 2:
            raise ConfigError(f"eval_fraction: task {self.name!r} has {len(self.rows)} prompt; nothing to hold out")
        order = list(range(len(self.rows)))
        random.Random(seed).shuffle(order)
        n_eval = min(max(1, round(fraction * len(order))), len(order) - 1)
        held = set(order[:n_eval])
        train = [r for i, r in enumerate(self.rows) if i not in held]
        evals = [self.rows[i] for i in order[:n_eval]]  # shuffled: its first n are a fair sample (eval_prompts)
        return replace(self, rows=train), replace(self, name=f"{self.name} (held out)", rows=evals)


def arithmetic(max_operand: int = 9) -> Task:
    rows = [
        {"prompt_id": f"{a}+{b}", "prompt": f"{a}+{b}=", "answer": str(a + b)}
        for a in range(max_operand + 1)
        for b in range(max_operand + 1)
    ]
    return Task("arithmetic", rows)


@dataclass(frozen=True)
class CalculatorTask(Task):
    """A task whose warm start shows the calculator's tag (grpo_lab/tools/parsing.py CHARACTER_CALC)."""

    def sft_pairs(self, seed: int, n: int, answers_correct: bool) -> list[tuple[str, str | tuple]]:
        """Half the warm start answers alone (random answers unless answers_correct), half calls
        the calculator, "calc 123+456=579": the model learns both forms, RL picks between them.

        A call's result is the tool's text, as (text, trained) segments (sft.warm_start): context,
        not a target, as in the RL loss. Were it a target, 500 steps would show each of the task's
        256 sums about 60 times, and a run without the tool could learn them by heart: the
        comparison with and without the tool would measure that instead of the tool."""
        plain, rng = super().sft_pairs(seed, n, answers_correct), random.Random(f"{seed}/calc")
        return [(p, ((f"calc {p.rstrip('=')}=", True), (str(_sum(p)), False))) if rng.random() < 0.5
                else (p, a) for p, a in plain]


def _sum(prompt: str) -> int:
    a, b = prompt.rstrip("=").split("+")
    return int(a) + int(b)


def big_arithmetic(n: int = 256, digits: int = 3, seed: int = 0) -> CalculatorTask:
    """n sums of two `digits`-digit numbers, too long for the built-in model to add by itself:
    the task where the calculator tool matters (--tools calculator)."""
    rng = random.Random(f"big_arithmetic/{seed}")
    low, high = 10 ** (digits - 1), 10 ** digits - 1
    pairs = dict.fromkeys((rng.randint(low, high), rng.randint(low, high)) for _ in range(n))
    rows = [{"prompt_id": f"{a}+{b}", "prompt": f"{a}+{b}=", "answer": str(a + b)} for a, b in pairs]
    return CalculatorTask("big_arithmetic", rows)


WORD_PROBLEM_SYSTEM = ("You are a careful math tutor. Solve the problem in one or two short sentences, "
                       "then give the final answer on its own line as 'Answer: <number>'.")
_NAMES = ("Tom", "Ana", "Li", "Sara", "Omar", "Maya", "Ben", "Zoe")
_ITEMS = ("apples", "marbles", "books", "stickers", "pencils", "cookies")
# (kind, text): {n} name, {i} item, {a} {b} numbers; kind picks the answer
_TEMPLATES = (
    ("add", "{n} has {a} {i} and buys {b} more. How many {i} does {n} have now?"),
    ("add", "{n} picked {a} {i} in the morning and {b} {i} in the afternoon. How many {i} did {n} pick in all?"),
    ("sub", "{n} had {a} {i} and gave {b} of them to a friend. How many {i} does {n} have left?"),
    ("sub", "There were {a} {i} on the table. {n} took {b}. How many {i} are still on the table?"),
    ("mul", "{n} has {a} bags with {b} {i} in each bag. How many {i} does {n} have?"),
    ("add", "A box holds {a} {i}. {n} puts in {b} more. How many {i} are in the box?"),
)


def word_problems(max_operand: int = 5) -> Task:
    """One-step arithmetic word problems over numbers 0..max_operand (subtractions never go negative)."""
    rows = []
    for t, (kind, text) in enumerate(_TEMPLATES):
        for a in range(max_operand + 1):
            for b in range(max_operand + 1):
                if kind == "sub" and b > a:
                    continue
                answer = {"add": a + b, "sub": a - b, "mul": a * b}[kind]
                name, item = _NAMES[(a + 3 * b + t) % len(_NAMES)], _ITEMS[(2 * a + b + t) % len(_ITEMS)]
                rows.append({"prompt_id": f"wp{t}-{a}-{b}", "prompt": text.format(n=name, i=item, a=a, b=b),
                             "answer": str(answer)})
    return Task("word_problems", rows, system=WORD_PROBLEM_SYSTEM)


def uses_chat_template(tokenizer, mode: str) -> bool:
    has = bool(getattr(tokenizer, "chat_template", None))
    if mode == "on" and not has:
        raise ConfigError("chat_template: on, but the model's tokenizer has no chat template; use auto or off")
    return has and mode != "off"


def render(task: Task, tokenizer, mode: str, system_prompt: str = "", tools: list | None = None) -> Task:
    """The task with each `prompt` replaced by the text the model is given, and the prompt as
    the dataset wrote it kept in `source_prompt` (what the rewards read).

    The system prompt is the row's `system` column, else `system_prompt`, else the task's own.
    With a chat template: the messages (system, user) rendered with the generation prompt, so the
    completion is the assistant's reply. Without: the system prompt, a blank line, the prompt
    (a row with no system prompt keeps its prompt exactly: '3+4=' stays '3+4=').
    tools: functions the template describes to the model (apply_chat_template(tools=...), as TRL
    passes them); ignored without a chat template, where the tag form is learnt (tasks.CalculatorTask).
    """
    chat = uses_chat_template(tokenizer, mode)
    rows = []
    for number, row in enumerate(task.rows, start=1):
        prompt = row["prompt"]
        messages = list(prompt) if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        system = row.get("system") or system_prompt or task.system
        if system and messages[0]["role"] != "system":
            messages.insert(0, {"role": "system", "content": system})
        if chat:
            try:
                text = tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=False,
                                                     add_generation_prompt=True)
            except Exception as exc:  # noqa: BLE001 - templates are user code (Jinja): any failure is a config error
                raise ConfigError(f"chat_template: the model's template failed on {task.name} prompt {number} "
                                  f"({type(exc).__name__}: {str(exc).splitlines()[0][:160]}); try --chat-template off"
                                  ) from None
        else:
            text = "\n\n".join(m["content"] for m in messages)
        # the rewards get the prompt as the dataset gave it (TRL's `prompts`: messages stay messages)
        rows.append({k: v for k, v in row.items() if k != "system"} | {"prompt": text, "source_prompt": prompt})
    return replace(task, rows=rows)
