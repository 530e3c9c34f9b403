"""The dashboard stays private: visitors from elsewhere need a token, and the launch form reaches
only the data folders and reward modules it is given."""

import pytest

from grpo_lab.dashboard import access
from grpo_lab.launching import allowed
from grpo_lab.launching import form_checks, launcher


@pytest.mark.parametrize("ip, local", [(None, True), ("127.0.0.1", True), ("::1", True), ("127.8.9.1", True),
                                       ("10.0.0.5", False), ("192.168.1.4", False), ("fe80::1%eth0", False),
                                       ("not-an-ip", False)])
def test_only_loopback_visitors_are_local(ip, local):
    assert access.is_local(ip) is local
    assert access.is_local(object())  # no network peer (AppTest's stand-in): the script runs locally


def test_a_token_must_be_set_and_match():
    assert access.token_ok("s3cret", "s3cret") and not access.token_ok("s3cre", "s3cret")
    assert not access.token_ok("", "")  # no token configured: nobody from elsewhere gets in


def test_paths_outside_the_data_folders_are_refused(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    private = tmp_path / "home" / "secrets.csv"
    private.parent.mkdir(parents=True)
    private.write_text("prompt,answer\nmy bank pin,1234\n")
    monkeypatch.delenv(allowed.DATA_DIRS_ENV, raising=False)
    refused = allowed.check_launch({"task": str(private)}, runs)
    assert refused.startswith(f"task: {private} is outside the folders the dashboard may read")
    with pytest.raises(form_checks.LaunchError, match="outside the folders"):
        launcher.validate({"task": str(private), "name": "x"}, runs)
    assert allowed.check_launch({"model": "../../etc"}, runs).startswith("model: ../../etc is outside")
    # inside the runs folder, a configured data folder, a built-in name or a hub id: fine
    (runs / "data.jsonl").parent.mkdir(parents=True)
    assert allowed.check_launch({"task": str(runs / "data.jsonl"), "model": "tiny"}, runs) is None
    assert allowed.check_launch({"model": "HuggingFaceTB/SmolLM2-135M-Instruct", "task": "word_problems"}, runs) is None
    monkeypatch.setenv(allowed.DATA_DIRS_ENV, str(private.parent))
    assert allowed.check_launch({"task": str(private)}, runs) is None


def test_reward_functions_come_only_from_configured_modules(tmp_path, monkeypatch):
    monkeypatch.delenv(allowed.REWARD_MODULES_ENV, raising=False)
    assert allowed.check_launch({"rewards": "correctness=1,length=0.1"}, tmp_path) is None
    refused = allowed.check_launch({"rewards": "os:system=1"}, tmp_path)
    assert refused.startswith("rewards: 'os:system' imports module 'os', which the dashboard does not run")
    assert allowed.check_launch({"rewards": {"mylab.rewards:score": 1.0}}, tmp_path) is not None
    monkeypatch.setenv(allowed.REWARD_MODULES_ENV, "mylab")
    assert allowed.check_launch({"rewards": {"mylab.rewards:score": 1.0}}, tmp_path) is None
    assert allowed.check_launch({"rewards": {"mylabx:score": 1.0}}, tmp_path) is not None
