"""More seeds of single-seed runs (Compare's "Add 2 seeds to each"): each queued entry carries its run's
options with a new seed, passes the launch form's checks, lands in its run's variant; a run whose
config.json the checks refuse queues nothing."""

import json

import pytest

from grpo_lab.launching import form_checks, launch_queue, launch_records, more_seeds, pending_launches
from grpo_lab.rundir import variants
from grpo_lab.trainer.config import from_dict
from queue_helpers import runs, set_state  # noqa: F401 (runs: a fixture; a runs folder, its key outside, no process)
from variants_helpers import write_run


def _config(runs, name: str) -> dict:
    return json.loads((runs / name / "config.json").read_text())


def _edit(runs, name: str, **changes) -> None:
    (runs / name / "config.json").write_text(json.dumps({**_config(runs, name), **changes}))


def _entry_config(runs, name: str) -> dict:
    """What the queued entry's trainer would run: its argv through the trainer's own parser and config."""
    entry = json.loads((runs / launch_records.LAUNCH_DIR / f"{name}.json").read_text())
    assert entry["queued"] and entry["signature"]
    return from_dict({**form_checks.parse_trainer_args(entry["argv"]), "runs_dir": str(runs)}).run_record()


@pytest.fixture
def singles(runs, monkeypatch):
    """Two single-seed runs of different configs (b: beta 0, seed 3), and the one slot held by a running run."""
    monkeypatch.setenv(launch_queue.MAX_RUNS_ENV, "1")
    for name, seed in (("busy", 0), ("a", 0), ("b", 3)):
        write_run(runs, name, "", "", seed, 0.5)
    _edit(runs, "b", beta=0.0, reward_params={"correctness": {"mode": "strict"}})
    set_state(runs, "busy", "running")
    return runs


def test_each_variant_gets_new_seeds_of_its_own_options_queued(singles):
    added = more_seeds.add(singles, [["a"], ["b"]], 2)
    assert [(r.name, r.seed, queued) for r, queued in added] == [
        ("a-s1", 1, True), ("a-s2", 2, True), ("b-s0", 0, True), ("b-s1", 1, True)]
    for run, _ in added:
        queued, original = _entry_config(singles, run.name), _config(singles, run.of)
        assert (queued["name"], queued["seed"]) == (run.name, run.seed)
        ignored = {"name", "seed", "sources", "runs_dir"}
        assert {k: v for k, v in queued.items() if k not in ignored} == \
               {k: v for k, v in original.items() if k not in ignored}
        assert variants.variant_key(queued) == variants.variant_key(original)  # Compare groups them
    assert _entry_config(singles, "b-s0")["beta"] == 0.0
    assert _entry_config(singles, "b-s0")["reward_params"] == {"correctness": {"mode": "strict"}}
    # asked again before they run: the seeds already waiting are not asked for twice
    again = more_seeds.add(singles, [["a"]], 2)
    assert [(r.name, r.seed) for r, _ in again] == [("a-s3", 3), ("a-s4", 4)]


def test_a_config_the_launch_checks_refuse_queues_nothing(singles):
    _edit(singles, "b", lr=-1.0)
    with pytest.raises(form_checks.LaunchError, match=r"^b: .*lr"):
        more_seeds.add(singles, [["a"], ["b"]], 2)
    assert not [p for p in pending_launches.pending(singles)]  # not even a's, checked before it
    with pytest.raises(form_checks.LaunchError, match="seeds: must be a whole number"):
        more_seeds.add(singles, [["a"]], 0)
