"""The Groups page's rescore form goes through the launch form's check (allowed.check_launch) over the
rewards and every parameter they are built with, and the sandbox starts no interpreter that check
refuses. Each payload names a program that leaves a marker file when it runs: the marker must never
appear, and nothing is written under the run's rescores/."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from grpo_lab.finished_runs import rescore
from grpo_lab.launching import allowed
from grpo_lab.rewards import sandbox
from grpo_lab.rewards.code_tests import code_tests_reward
from run_sources import verl_run  # noqa: F401 - the imported verl run, a fixture (one per module)


def marker_program(folder: Path) -> tuple[Path, Path]:
    """An executable that writes a marker file when anything starts it."""
    folder.mkdir(parents=True, exist_ok=True)
    marker, program = folder / "ran.marker", folder / "python3"
    program.write_text(f"#!/bin/sh\necho ran >> {marker}\n")
    program.chmod(0o755)
    return program, marker


@pytest.fixture
def no_program_check():
    yield
    sandbox.set_program_check(None)  # the app installs one in this process; other tests start none


def payloads(outside: Path, in_runs: Path, ratings: Path) -> dict[str, dict]:
    return {
        "an interpreter outside the data folders": {"code_tests": {"column": "answer", "python": str(outside)}},
        "the same, unsandboxed as this user": {"code_tests": {"column": "answer", "python": str(outside),
                                                              "allow_unsandboxed": True, "user": None}},
        "an interpreter planted in the runs folder": {"code_tests": {"column": "answer", "python": str(in_runs)}},
        "the sandbox switched off": {"code_tests": {"column": "answer", "allow_unsandboxed": True}},
        "the sandbox as root": {"code_tests": {"column": "answer", "user": None}},
        "a ratings file outside the data folders": {"human_feedback": {"path": str(ratings)}},
    }


CASES = ["an interpreter outside the data folders", "the same, unsandboxed as this user",
         "an interpreter planted in the runs folder", "the sandbox switched off", "the sandbox as root",
         "a ratings file outside the data folders"]
SAYS = {"an interpreter outside the data folders": "reward_params.code_tests.python",
        "the same, unsandboxed as this user": "reward_params.code_tests.python",
        "an interpreter planted in the runs folder": "inside the runs folder",
        "the sandbox switched off": "reward_params.code_tests.allow_unsandboxed",
        "the sandbox as root": "reward_params.code_tests.user",
        "a ratings file outside the data folders": "reward_params.human_feedback.path"}


@pytest.mark.parametrize("case", CASES)
def test_the_launch_check_refuses_each_payload_with_one_line(verl_run, tmp_path_factory, case):
    outside, _ = marker_program(tmp_path_factory.mktemp("elsewhere"))
    in_runs, _ = marker_program(verl_run.parent / "planted")
    params = payloads(outside, in_runs, tmp_path_factory.mktemp("ratings") / "r.jsonl")[case]
    request = rescore.parse_request(",".join(params), params=params, name="x")
    refused = allowed.check_launch(request.launch_values(), verl_run.parent)
    assert refused is not None and SAYS[case] in refused and "\n" not in refused


def test_the_run_s_own_parameters_are_checked_too(verl_run, tmp_path_factory):
    """A planted config.json naming the interpreter reaches the rewards through the merge: checked."""
    outside, _ = marker_program(tmp_path_factory.mktemp("elsewhere"))
    own = {"rewards": {"code_tests": 1.0}, "reward_params": {"code_tests": {"python": str(outside)}}}
    request = rescore.parse_request("code_tests", run_config=own, name="x")
    assert "reward_params.code_tests.python" in allowed.check_launch(request.launch_values(), verl_run.parent)


@pytest.mark.parametrize("case", CASES)
def test_the_groups_form_refuses_each_payload_and_starts_nothing(verl_run, tmp_path_factory, monkeypatch, case,
                                                                 no_program_check):
    from app_helpers import open_page, texts
    from grpo_lab.dashboard import i18n

    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(verl_run.parent))
    monkeypatch.delenv("GRPO_LAB_DATA_DIRS", raising=False)
    outside, outside_marker = marker_program(tmp_path_factory.mktemp("elsewhere"))
    in_runs, in_runs_marker = marker_program(verl_run.parent / "planted")
    params = payloads(outside, in_runs, tmp_path_factory.mktemp("ratings") / "r.jsonl")[case]
    at = open_page("groups", run="verl")
    at.text_input(key="rescore_spec").set_value(",".join(params))
    at.text_input(key="rescore_params").set_value(json.dumps(params))
    at.text_input(key="rescore_name").set_value("payload")
    next(b for b in at.button if b.label == i18n.texts("en")["rescore.start"]).click()
    at.run(timeout=120)
    assert SAYS[case] in texts(at.error), texts(at.error)
    assert not outside_marker.exists() and not in_runs_marker.exists()
    assert not (verl_run / "rescores" / "payload").exists()


def test_the_sandbox_starts_no_interpreter_the_installed_check_refuses(tmp_path, no_program_check):
    program, marker = marker_program(tmp_path / "bin")
    sandbox.set_program_check(lambda python: allowed.check_program(python, tmp_path / "runs"))
    with pytest.raises(ValueError, match="sandbox: reward_params.code_tests.python"):
        code_tests_reward(python=str(program))
    with pytest.raises(ValueError, match="sandbox: reward_params.code_tests.python"):
        code_tests_reward(python=str(program), user=None, allow_unsandboxed=True)
    assert not marker.exists()


def test_without_a_check_the_sandbox_still_runs_nothing_to_learn_how_to_isolate(tmp_path, no_program_check):
    """The trainer and grpo-lab-rescore are the person at the machine, but an interpreter is never run to find
    its library folders (they are read from its files): a program that is no Python is refused in one line,
    and it did not run."""
    program, marker = marker_program(tmp_path / "bin")
    sandbox.set_program_check(None)
    os.environ.pop(sandbox.ALLOW_UNSANDBOXED_ENV, None)
    with pytest.raises(ValueError, match="sandbox: cannot isolate"):
        code_tests_reward(python=str(program))
    assert not marker.exists()
