"""A real PPO run loads in the dashboard's Compare page beside a real GRPO run (same task, same seed)."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from grpo_lab.dashboard import pages
from shared_runs import copy_run, grpo_run, ppo_run  # noqa: F401 (fixtures: pytest finds them by name)

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "grpo_lab" / "dashboard" / "app.py")


@pytest.fixture(scope="module")
def runs(tmp_path_factory, grpo_run, ppo_run):
    """The session's GRPO and PPO runs: same task, model, warm start and seed (shared_runs)."""
    root = tmp_path_factory.mktemp("runs")
    copy_run(grpo_run, root, "grpo", checkpoints=False)
    copy_run(ppo_run, root, "ppo", checkpoints=False)
    return root


@pytest.fixture
def compare(runs, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))

    def open_page(**state):
        at = AppTest.from_file(APP, default_timeout=60)
        at.run()
        for key, value in state.items():
            at.session_state[key] = value
        at.switch_page(pages.path("compare"))
        at.run()
        assert not at.exception, [e.message for e in at.exception]
        return at
    return open_page


def test_ppo_and_grpo_side_by_side(compare):
    at = compare(cmp_runs=["ppo", "grpo"], cmp_left="ppo", cmp_right="grpo")
    summary = at.dataframe[0].value
    assert dict(zip(summary["run"], summary["algo"])) == {"ppo": "ppo", "grpo": "grpo"}
    assert summary["best reward"].notna().all() and summary["final KL"].notna().all()
    diff = at.dataframe[1].value
    assert "algo" in set(diff["option"]) and "seed" not in set(diff["option"])  # same seed, same task
    assert len(at.get("vega_lite_chart")) == 4  # the default metrics, each with both runs
    # the same prompt's group from each run: the PPO group renders like the GRPO one
    assert " ".join(e.proto.body for e in at.get("html")).count("grpo-responses") == 2


def test_a_ppo_only_metric_beside_a_grpo_run(compare):
    at = compare(cmp_runs=["ppo", "grpo"], cmp_metrics=["value/loss", "value/explained_variance", "reward/mean"])
    assert len(at.get("vega_lite_chart")) == 3
    assert "value/loss" in at.multiselect(key="cmp_metrics").options
    assert "hit a problem" not in " ".join(str(e.value) for e in at.error)
