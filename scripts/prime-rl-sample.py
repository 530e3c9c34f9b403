"""Writes tests/rundir/prime_rl_rollouts/: a prime-rl FileMonitor's rollouts folder, episodes built with
verifiers' own v1 classes and written as FileMonitor writes them (orjson of Episode.to_record(), one a line,
rollouts/step_<N>/train/effective/traces.jsonl). verifiers is not a dependency of this project: run once,

    pip install --target /tmp/vf-site verifiers==0.4.0
    PYTHONPATH=/tmp/vf-site python scripts/prime-rl-sample.py

and commit the files it writes (tests/rundir/test_import_prime_rl.py reads them)."""

from __future__ import annotations

from pathlib import Path

import orjson
from verifiers.v1 import AssistantMessage, ToolMessage, UserMessage
from verifiers.v1.configs.agent import WireAgentConfig
from verifiers.v1.episode import Episode, GroupInfo
from verifiers.v1.graph import MessageNode
from verifiers.v1.trace import AgentInfo, Reward, Trace, TraceTask

OUT = Path(__file__).resolve().parent.parent / "tests" / "rundir" / "prime_rl_rollouts"
PROMPTS = {"g-a": "What is 2+2?", "g-b": "Solve x+10=15 with the calculator."}
ANSWERS = {1: {"g-a": ["4", "5", "4"], "g-b": ["x=5", "x=5", "x=5"]},
           2: {"g-a": ["4", "4", "22"], "g-b": ["x=6", "x=5", "x=25"]}}
RIGHT = {"g-a": "4", "g-b": "x=5"}


def episode(group: str, answer: str, advantage: float, tool: bool) -> Episode:
    nodes = [MessageNode(message=UserMessage(content=PROMPTS[group]), token_ids=[1, 2, 3], mask=[False] * 3)]
    if tool:  # a multi-turn rollout: a call, the tool's result, then the answer
        nodes += [MessageNode(parent=0, message=AssistantMessage(content="calc 15-10"), sampled=True,
                              token_ids=[4, 5], mask=[True, True], logprobs=[-0.1, -0.2]),
                  MessageNode(parent=1, message=ToolMessage(content="5", tool_call_id="c1"), token_ids=[6],
                              mask=[False])]
    nodes.append(MessageNode(parent=len(nodes) - 1, message=AssistantMessage(content=answer), sampled=True,
                             token_ids=[7, 8], mask=[True, True], logprobs=[-0.3, -0.4],
                             advantages=[advantage, advantage]))
    trace = Trace(task=TraceTask(type="math", data={"question": PROMPTS[group]}),
                  agent=AgentInfo(config=WireAgentConfig()), nodes=nodes, is_completed=True, ok=True,
                  rewards={"correct": Reward(score=float(answer == RIGHT[group])),
                           "format": Reward(score=1.0, weight=0.1)},
                  info={"advantage": advantage})
    return Episode(task=trace.task, group=GroupInfo(id=group), ok=True, traces=[trace])


def main() -> None:
    for step, by_group in ANSWERS.items():
        path = OUT / f"step_{step}" / "train" / "effective" / "traces.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            for group, answers in by_group.items():
                rewards = [float(a == RIGHT[group]) + 0.1 for a in answers]
                mean = sum(rewards) / len(rewards)
                for answer, r in zip(answers, rewards):
                    ep = episode(group, answer, round(r - mean, 6), tool=group == "g-b")
                    f.write(orjson.dumps(ep.to_record(), default=str, option=orjson.OPT_APPEND_NEWLINE))
        print(path)


if __name__ == "__main__":
    main()
