"""A run made by TRL's GRPOTrainer with RunDirCallback, in the server's runs folder, opened on the
Groups page in a real browser: the group's completions with their rewards and advantages as the
run directory has them, and "not logged by TRL" where a native run shows its tokens."""

from __future__ import annotations


import pytest
from browser_helpers import assert_page_whole, literal, locale, open_groups
from playwright.sync_api import expect
from trainer_helpers import read_table

pytestmark = pytest.mark.browser
pytest.importorskip("trl")
from trl_helpers import G, run_trl  # noqa: E402  (needs trl, a test-only dependency)

from grpo_lab.rundir.trl import RunDirCallback  # noqa: E402

NAME = "trl-live"
expect.set_options(timeout=60_000)


@pytest.fixture(scope="module")
def trl_run(server, tmp_path_factory):
    """(base url, the run's samples table) once TRL has trained for its few steps into the server's runs."""
    url, runs = server
    run_trl(tmp_path_factory.mktemp("trl-browser"), "trl-out", callbacks=[RunDirCallback(runs / NAME)])
    return url, read_table(runs / NAME, "samples")


def words(text: str) -> str:
    """A completion as the page shows it, either way (whitespace markers on or off), as plain words."""
    return " ".join(text.replace("␣", " ").replace("⏎", "\n").split())


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_groups_shows_a_trl_group(trl_run, page, lang):
    url, samples = trl_run
    step, group = open_groups(page, url, NAME, lang)
    assert step == samples["step"].max()  # the page opens on the latest logged step
    rows = samples[(samples["step"] == step) & (samples["group"] == group)]
    rows = rows.sort_values(["advantage", "sample_idx"], ascending=[False, True])  # the page's order
    assert len(rows) == G

    table = page.locator("table.grpo-responses")
    expect(table).to_have_count(1)
    head = table.locator("thead th").all_inner_texts()
    assert {"correct", "digits"} <= set(head)  # a column per reward function
    shown = [tr.locator("td").all_inner_texts() for tr in table.locator("tbody tr").all()]
    at = {h: head.index(h) for h in (locale(lang)["col.completion"], locale(lang)["col.reward"], "A_i")}
    empty = f"∅ {locale(lang)['markup.empty']}"
    assert [r[at["A_i"]] for r in shown] == [f"{a:+.3f}" for a in rows["advantage"]]
    assert [r[at[locale(lang)["col.reward"]]] for r in shown] == [f"{v:.3f}" for v in rows["reward"]]
    assert [words(r[at[locale(lang)["col.completion"]]]) for r in shown] == \
        [empty if c == "" else words(c) for c in rows["completion"]]
    colours = [tr.get_attribute("data-adv") for tr in table.locator("tbody tr").all()]
    assert colours == ["pos" if a > 0 else "neg" if a < 0 else "zero" for a in rows["advantage"]]  # the tint

    # TRL's advantages, recomputed by the page with TRL's epsilon, and no token chips: a note instead
    expect(page.get_by_text(literal("groups.match", lang))).to_be_visible()
    expect(page.get_by_text(locale(lang)["groups.tokens_foreign"].format(source="TRL"))).to_be_visible()
    expect(page.locator("span.tok")).to_have_count(0)
    assert_page_whole(page, chinese=lang == "zh")
