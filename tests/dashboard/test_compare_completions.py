"""Compare's completions view: one prompt matched across a native run and a verl import by what it
asks, each run's G completions at the same or nearest step side by side with reward and A_i, and the
prompts ranked by how differently the runs did on them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from app_helpers import html_bodies, open_page
from grpo_lab.dashboard.views.compare import compare_completions_view as ccv
from prompt_history_helpers import import_verl_of
from shared_runs import copy_run, grpo_run  # noqa: F401 (a fixture: pytest finds it by name)
from trainer_helpers import read_table


def test_prompts_ranked_by_how_differently_the_runs_did():
    long = pd.DataFrame({"run": ["a", "b", "c", "a", "b", "a", "c"],
                         "key": ["same", "same", "same", "split", "split", "only a", "half"],
                         "pass_rate": [0.5, 0.5, 0.5, 1.0, 0.0, 1.0, 0.5],
                         "mean_reward": [0.5, 0.4, 0.6, 1.0, 0.0, 1.0, 0.5]})
    ranked = ccv.ranked(long, ["a", "b", "c"])
    assert ranked["key"].tolist() == ["split", "same"]  # "only a" and "half" were drawn by one run each
    assert ranked["pass_spread"].tolist() == [1.0, 0.0] and ranked["reward_spread"].tolist() == pytest.approx([1.0, 0.2])
    assert ranked["runs"].tolist() == [2, 3]
    assert ranked.loc[0, "c"] != ranked.loc[0, "c"]  # run c never drew "split": no pass rate, not 0
    assert ccv.ranked(long.iloc[:0], ["a"]).empty


@pytest.fixture(scope="module")
def runs(tmp_path_factory, grpo_run):
    """The shared native GRPO run and a verl import of two of its prompts, drawn on steps 1-3."""
    root = tmp_path_factory.mktemp("compare-completions") / "runs"
    root.mkdir()
    copy_run(grpo_run, root, "grpo", checkpoints=False)
    texts = import_verl_of(read_table(root / "grpo", "samples"), root, "verl")
    return root, texts


def compare(runs, monkeypatch, lang: str = "en", **state):
    root, _ = runs
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(root))
    return open_page("compare", lang=lang, cmp_runs=["grpo", "verl"], **state)


def test_two_runs_answers_to_one_prompt_side_by_side(runs, monkeypatch):
    root, texts = runs
    at = compare(runs, monkeypatch)
    native, verl = read_table(root / "grpo", "samples"), read_table(root / "verl", "samples")
    ranked = next(d.value for d in at.dataframe if "pass_spread" in d.value)
    assert sorted(ranked["key"]) == sorted(texts)  # both prompts the runs share, matched by what they ask
    # the first: the one the runs did most differently on; its completions from each run, side by side
    key = at.selectbox(key=ccv.PROMPT_KEY).value
    assert key == ranked["key"].iloc[0]
    body = html_bodies(at)
    assert body.count('class="grpo-responses"') == 2 and f'<div class="grpo-prompt"><span style="white-space:pre-wrap">{key}</span>' in body
    mine, theirs = native[native["prompt"] == key], verl[verl["prompt"] == key]
    # blank step: every run at the latest step all of them reached (the smaller of their latest draws), each
    # showing its draw nearest it (the earlier on a tie)
    common = min(int(mine["step"].max()), int(theirs["step"].max()))

    def nearest_step(rows):
        steps = sorted(set(rows["step"]))
        return min(steps, key=lambda s: (abs(s - common), s))

    shown = {}
    for name, rows in (("grpo", mine), ("verl", theirs)):
        shown[name] = nearest_step(rows)
        drawn = rows[rows["step"] == shown[name]]
        assert all(str(c) in body for c in drawn["completion"])
        assert all(f"{a:+.3f}" in body for a in drawn["advantage"])
    lines = " ".join(m.value for m in at.markdown)
    assert f"**grpo** · step {shown['grpo']}" in lines and f"**verl** · step {shown['verl']}" in lines
    said = " ".join(str(i.value) for i in at.info)
    assert ("Not every run drew this prompt" in said) == (shown["grpo"] != shown["verl"])


def test_blank_step_shows_every_run_at_the_step_all_reached():
    frames = {"a": pd.DataFrame({"step": [3, 40]}), "b": pd.DataFrame({"step": [14]}), "c": pd.DataFrame({"step": []})}
    assert ccv.common_step(frames) == 14 and ccv.common_step({}) is None


def test_the_nearest_draw_to_a_step(runs, monkeypatch):
    root, texts = runs
    at = compare(runs, monkeypatch, cmpc_step=1)
    key = at.selectbox(key=ccv.PROMPT_KEY).value
    verl = read_table(root / "verl", "samples")
    first = verl[(verl["prompt"] == key) & (verl["step"] == 1)]
    assert all(str(c) in html_bodies(at) for c in first["completion"])
    assert "**verl** · step 1" in " ".join(m.value for m in at.markdown)
    # another prompt picked: its own completions
    other = next(k for k in texts if k != key)
    at.selectbox(key=ccv.PROMPT_KEY).set_value(other).run()
    shown = verl[(verl["prompt"] == other) & (verl["step"] == 1)]
    assert all(str(c) in html_bodies(at) for c in shown["completion"])


def test_the_completions_view_in_chinese(runs, monkeypatch):
    at = compare(runs, monkeypatch, lang="zh")
    assert "同一提示词的回答，并排对比" in [s.value for s in at.subheader]
    assert html_bodies(at).count('class="grpo-responses"') == 2
