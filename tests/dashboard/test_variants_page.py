"""The Compare page for `?sweep=NAME`: both variants drawn with bands, the CI table and the verdict,
in English and Chinese. The runs are written with the run-directory writer (no trainer): two
variants x 3 seeds whose rewards are far apart, and one run of another sweep that must not show."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from grpo_lab.dashboard import i18n, pages

from app_helpers import APP, charts, texts
from variants_helpers import write_run, write_sweep


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep_runs")
    write_sweep(root, "s", {"beta=0": 0.2, "beta=0.04": 0.8}, seeds=3)
    write_run(root, "other-base-s0", "other", "base", 0, 0.5)
    return root


def sweep_page(lang: str, **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    if lang != "en":
        at.session_state["lang"] = lang
    at.run()
    at.query_params["sweep"] = "s"
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(pages.path("compare"))
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert not [e.value for e in at.error]
    return at


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_sweep_page_shows_both_variants_with_bands_and_the_verdict(runs, monkeypatch, lang):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    at = sweep_page(lang)
    drawn = charts(at)
    assert len(drawn) == 2  # reward/mean and kl/mean
    spec = drawn[0].spec if hasattr(drawn[0], "spec") else drawn[0].proto.spec
    assert '"area"' in spec and '"y2"' in spec  # the band
    table = at.dataframe[0].value
    assert sorted(set(table.iloc[:, 0])) == ["beta=0", "beta=0.04"]  # not the other sweep's run
    # n seeds per metric; beta=0 (reward up to 0.2) never reaches the 0.5 threshold, so none count there
    assert table.iloc[:, -1].tolist() == [3, 3, 3, 3, 0, 3, 3, 3, 3, 3]
    final = table.iloc[0, 2]
    assert "[" in final and "]" in final  # mean [low, high]
    verdict = texts(at.markdown)
    if lang == "en":
        assert "**beta=0.04** is higher than **beta=0** in final reward by 0.6" in verdict
        assert "3 and 3 seeds" in verdict
    else:
        assert "**beta=0.04** 的最终奖励比 **beta=0** 高 0.6" in verdict


def test_single_seeds_and_another_x_axis(runs, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    at = sweep_page("en", var_seeds=True, **{"var_x@en": "tokens"})
    spec = charts(at)[0].proto.spec
    assert '"seeds"' in spec and '"detail"' in spec
    assert "tokens trained" in spec


def test_a_language_switch_keeps_the_choices_and_shows_them_translated(runs, monkeypatch):
    """The x-axis and the difference's metric are widgets per language (i18n.per_language): a
    browser would otherwise keep showing the English label on the Chinese page."""
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    at = sweep_page("en", **{"var_x@en": "tokens", "var_metric@en": "best reward"})
    at.session_state["lang"] = "zh"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    zh = i18n.texts("zh")
    x, metric = at.selectbox(key="var_x@zh"), at.selectbox(key="var_metric@zh")
    assert (x.value, metric.value) == ("tokens", "best reward")
    assert zh["variants.x_tokens"] in x.options and zh["variants.metric_best_reward"] in metric.options


def test_an_unknown_sweep_says_so(runs, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.query_params["sweep"] = "nope"
    at.switch_page(pages.path("compare"))
    at.run()
    assert not at.exception
    assert "No runs of sweep nope" in texts(at.warning)


def test_runs_launched_apart_group_into_variants(tmp_path, monkeypatch):
    """No sweep: picked runs whose configs differ only in seed and name are one variant."""
    for seed in range(2):
        write_run(tmp_path, f"solo-s{seed}", "", "", seed, 0.5)
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.session_state["cmp_runs"] = ["solo-s0", "solo-s1"]
    at.session_state["cmp_as_variants"] = True
    at.switch_page(pages.path("compare"))
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert "1 variant(s), 2 run(s)" in texts(at.caption)
    table = at.dataframe[-1].value
    assert table.iloc[0, 0] == "solo-s0 (+1)" and table.iloc[0, -1] == 2
