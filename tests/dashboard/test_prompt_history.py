"""A prompt's history: every draw of one prompt (its G rewards, mean, std, pass rate, completions with
their advantages), the run's prompts learned / forgotten / never / always solved, and the page that
shows them, opened from a group on Groups, on a native run and on a verl import."""

from __future__ import annotations

import math
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from app_helpers import html_bodies
from grpo_lab.dashboard import pages
from grpo_lab.rundir import prompt_history as ph
from prompt_history_helpers import WORKED, import_verl_of, write_worked
from shared_runs import copy_run, grpo_run  # noqa: F401 (a fixture: pytest finds it by name)
from trainer_helpers import read_table


@pytest.fixture(params=[2, 1], ids=["schema2", "schema1"])
def worked(tmp_path, request) -> Path:
    """WORKED written with the `group` column (schema 2) and without it (schema 1: derived from row order)."""
    write_worked(tmp_path / "worked", v2=request.param == 2)
    return tmp_path / "worked"


def test_every_draw_of_a_prompt_with_its_rewards_pass_rate_and_advantages(worked):
    draws, problems = ph.draws(worked, "up")
    assert not problems
    assert draws["step"].tolist() == [1, 2, 3, 4] and (draws["size"] == 4).all()
    assert draws["pass_rate"].tolist() == [0.25, 0.25, 0.75, 1.0]  # the NaN of step 2 does not pass
    # the unscored completion is left out of the mean and std, not counted as 0 (or as NaN >= 0.5)
    assert draws["mean_reward"].tolist() == pytest.approx([0.25, 1 / 3, 0.75, 1.0])
    assert draws["std"].tolist() == pytest.approx([math.sqrt(3) / 4, math.sqrt(2) / 3, math.sqrt(3) / 4, 0.0])
    assert draws["rewards"].tolist() == ["0 0 0 1", "0 ∅ 1 0", "1 1 0 1", "1 1 1 1"]  # in sample order
    assert draws["advantages"].iloc[0] == "-0.577 -0.577 -0.577 1.73"  # (r - 0.25) / (sqrt(3) / 4)
    assert (draws["a_max"].iloc[3], draws["a_min"].iloc[3]) == (0.0, 0.0)
    assert ph.draws(worked, "up", pass_at=1.0)[0]["pass_rate"].tolist() == [0.25, 0.25, 0.75, 1.0]
    assert ph.draws(worked, "never", pass_at=0.2)[0]["pass_rate"].tolist() == [0.0, 0.25]
    assert ph.draws(worked, "no such prompt")[0].empty


def test_prompts_learned_forgotten_never_and_always_solved(worked):
    table, problems = ph.outcomes(worked)
    assert not problems
    rows = table.set_index("prompt_id")
    assert rows["kind"].to_dict() == {"up": "learned", "down": "forgotten", "never": "never", "always": "always",
                                      "once": "once"}
    assert (rows.loc["up", "early"], rows.loc["up", "late"], rows.loc["up", "change"]) == (0.25, 0.875, 0.625)
    assert (rows.loc["down", "early"], rows.loc["down", "late"]) == (0.75, 0.0)
    assert rows["draws"].to_dict() == {p: len(d) for p, d in WORKED.items()}
    assert rows.loc["always", "no_signal"] == 1.0 and rows.loc["up", "no_signal"] == 0.25
    assert (rows.loc["up", "first_step"], rows.loc["up", "last_step"]) == (1, 4)
    # the threshold decides: at 0.2, the 0.25 reward of "never" passes, and it was learned
    assert ph.outcomes(worked, pass_at=0.2)[0].set_index("prompt_id").loc["never", "kind"] == "learned"


def test_a_draw_nearest_a_step_and_a_draws_completions(worked):
    draws, _ = ph.draws(worked, "down")
    assert int(ph.nearest(draws, 2)["step"]) == 1 and int(ph.nearest(draws, 9)["step"]) == 3
    rows, problems = ph.completions(worked, "down", 3, 1)
    assert not problems and rows["completion"].tolist() == [f"down answer {i}" for i in range(4)]


# --- the page -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory, grpo_run):
    """A native GRPO run (shared) and a verl import of two of its prompts drawn on 3 steps."""
    root = tmp_path_factory.mktemp("prompt-history") / "runs"
    root.mkdir()
    copy_run(grpo_run, root, "grpo", checkpoints=False)
    import_verl_of(read_table(root / "grpo", "samples"), root, "verl")
    return root


def history(runs: Path, monkeypatch, run: str, prompt: str, lang: str = "en", **state):
    """The prompt-history page at its address /prompt?run=RUN&prompt=ID."""
    return at_address(runs, monkeypatch, "prompt_history", {"run": run, "prompt": prompt}, lang, **state)


def at_address(runs: Path, monkeypatch, page: str, params: dict[str, str], lang: str = "en", **state):
    """`page` (pages.py) opened with the address's query `params`, in `lang`."""
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    from streamlit.testing.v1 import AppTest

    from app_helpers import APP

    at = AppTest.from_file(APP, default_timeout=60)
    if lang != "en":
        at.session_state["lang"] = lang
    at.run()
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(pages.path(page))
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert not [e.value for e in at.error]
    return at


@pytest.mark.parametrize("run", ["grpo", "verl"])
def test_groups_links_each_group_to_its_prompts_history(runs, monkeypatch, run):
    at = at_address(runs, monkeypatch, "groups", {"run": run})
    links = [e.proto for e in at.get("page_link") if e.proto.page.endswith("prompt")]
    assert len(links) == 1
    heading = next(h.value for h in at.subheader if "`" in h.value)  # groups.heading: "Step S · group G · prompt `ID`"
    assert parse_qs(links[0].query_string) == {"run": [run], "prompt": [heading.split("`")[1]]}


def test_a_native_runs_prompt_history_at_its_address(runs, monkeypatch):
    samples = read_table(runs / "grpo", "samples")
    prompt_id = samples["prompt_id"].iloc[-1]
    at = history(runs, monkeypatch, "grpo", prompt_id)
    mine = samples[samples["prompt_id"] == prompt_id]
    groups = mine.groupby(["step", "group"])
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["draws"] == str(groups.ngroups) and metrics["completions"] == str(len(mine))
    draws = at.dataframe[0].value
    assert draws["step"].tolist() == sorted(mine["step"].unique(), reverse=True)  # newest first
    newest = mine[mine["step"] == mine["step"].max()].sort_values("sample_idx")
    assert draws["rewards"].iloc[0] == " ".join(f"{r:.3g}" for r in newest["reward"])
    assert draws["pass_rate"].iloc[0] == pytest.approx((newest["reward"] >= 0.5).mean())
    # the newest draw's completions, each with the advantage the step gave it
    body = html_bodies(at)
    assert body.count("<tr class=\"adv-") == len(newest)
    assert all(f"{a:+.3f}" in body for a in newest["advantage"])
    assert at.query_params["prompt"] == [prompt_id] or at.query_params["prompt"] == prompt_id
    assert "0.5" in " ".join(c.value for c in at.caption)  # the definition of a pass, said on the page


def test_an_imported_runs_prompt_history_and_outcome_tables(runs, monkeypatch):
    samples = read_table(runs / "verl", "samples")
    learned = samples[samples["step"] == 1]["prompt_id"].iloc[0]  # the first prompt: 0, 1/4, 3/4 passed
    at = history(runs, monkeypatch, "verl", learned)
    draws = at.dataframe[0].value
    assert draws["step"].tolist() == [3, 2, 1] and draws["pass_rate"].tolist() == [0.75, 0.25, 0.0]
    at = history(runs, monkeypatch, "verl", learned, ph_view="outcomes")
    tabs = [tab.label for tab in at.tabs]
    assert tabs == ["Learned (1)", "Forgotten (0)", "Never solved (0)", "Always solved (1)"]
    assert at.dataframe[0].value["prompt_id"].tolist() == [learned]


def test_the_page_in_chinese(runs, monkeypatch):
    samples = read_table(runs / "verl", "samples")
    at = history(runs, monkeypatch, "verl", samples["prompt_id"].iloc[0], lang="zh", ph_view="outcomes")
    assert [tab.label for tab in at.tabs][0] == "学会的 (1)"
    assert at.title[0].value.endswith("提示词历史")


def test_a_search_finds_a_prompt_by_what_it_asks(runs, monkeypatch):
    samples = read_table(runs / "grpo", "samples")
    first = samples["prompt_id"].iloc[0]
    other = next(p for p in samples["prompt_id"] if p != first)
    at = history(runs, monkeypatch, "grpo", other)
    at.text_input(key="ph_search").input(samples["prompt"].iloc[0]).run()  # the question's text, "3+4="
    assert at.selectbox(key="ph_prompt").value == first
    assert at.query_params["prompt"] in (first, [first])
