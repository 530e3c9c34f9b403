"""The launch form offers every option a page launch needs to set: the sampler mismatch correction's bounds
(mismatch_cap, mismatch_cap_min) beside the correction itself, with the trainer's defaults and limits."""

from __future__ import annotations

from app_helpers import open_page


def test_the_launch_form_has_the_mismatch_bounds(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    at = open_page("runs")
    cap, low = at.number_input(key="launch_0_mismatch_cap"), at.number_input(key="launch_0_mismatch_cap_min")
    assert (cap.value, low.value) == (3.0, 0.0)
    assert cap.min == 1.0 and (low.min, low.max) == (0.0, 1.0)
    assert "C_max" in cap.help and "C_min" in low.help
