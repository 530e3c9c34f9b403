"""grpo-lab-import of a prime-rl run's rollouts. tests/rundir/prime_rl_rollouts/ was written by verifiers' own
Episode and Trace classes (verifiers 0.4.0) and laid out as prime-rl's FileMonitor writes it
(scripts/prime-rl-sample.py): two steps, two groups of three episodes, one group with a tool call."""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from trainer_helpers import read_table

cli = importlib.import_module("grpo_lab.rundir.import")
ROLLOUTS = Path(__file__).resolve().parent / "prime_rl_rollouts"


def records(step: int) -> list[dict]:
    return [json.loads(line) for line in (ROLLOUTS / f"step_{step}" / "train" / "effective" / "traces.jsonl")
            .read_text().splitlines()]


@pytest.fixture
def imported(tmp_path):
    source = tmp_path / "out" / "rollouts"
    shutil.copytree(ROLLOUTS, source)
    assert cli.main([str(tmp_path / "out"), "--name", "prime", "--runs-dir", str(tmp_path / "runs")]) == 0
    return tmp_path / "runs" / "prime"


def test_prompt_completion_rewards_advantage_and_group_come_in(imported):
    got = read_table(imported, "samples")
    assert len(got) == 12
    for step in (1, 2):
        s, eps = got[got["step"] == step], records(step)
        trace = [e["traces"][0] for e in eps]
        assert s["prompt"].tolist() == [t["nodes"][0]["message"]["content"] for t in trace]
        assert s["completion"].tolist() == ["\n\n".join(n["message"]["content"] for n in t["nodes"][1:])
                                            for t in trace]  # the tool call and its result stay in the completion
        totals = [sum(r["score"] * r["weight"] for r in t["rewards"].values()) for t in trace]
        assert np.allclose(s["reward"], totals)
        assert s["rewards/correct"].tolist() == [t["rewards"]["correct"]["score"] for t in trace]
        assert np.allclose(s["advantage"], [t["info"]["advantage"] for t in trace])
        assert s["group"].tolist() == [0, 0, 0, 1, 1, 1]  # by group.id, in order of first appearance
    assert "calc 15-10\n\n5\n\nx=5" in got["completion"].tolist()


def test_the_scalars_and_config_say_what_the_rollouts_tell(imported):
    scalars = read_table(imported, "scalars").set_index("step")
    assert scalars.loc[1, "groups/frac_zero_std"] == 0.5  # step 1: every g-b answer is right
    assert scalars.loc[2, "groups/frac_zero_std"] == 0.0
    config = json.loads((imported / "config.json").read_text())
    assert config["source"] == "prime-rl" and config["group_size"] == 3 and config["max_steps"] == 2


def test_an_episode_without_traces_is_one_line_naming_it(tmp_path, capsys):
    path = tmp_path / "out" / "rollouts" / "step_1" / "train" / "all" / "traces.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text('{"id": "x", "group": {"id": "g"}}\n')
    assert cli.main([str(tmp_path / "out"), "--name", "bad", "--runs-dir", str(tmp_path / "runs"),
                     "--format", "prime-rl"]) == 2
    assert "traces.jsonl:1: expected an episode record" in capsys.readouterr().err
    assert not (tmp_path / "runs" / "bad").exists()
