"""Hostile run text in a real browser: an imported run whose prompt, prompt id and error carry Markdown images
and links, and a 1,000,000-character completion without a space. The Groups page asks nothing of the
image host, shows the text as written, keeps A_i and the reward on screen, draws the long completion
cut (the page never holds all of it: a 1 MB one took 15 s to draw) and gives it whole on request (a
download, a box drawn once opened: views/long_text.py); the Runs page shows the error as text."""

from __future__ import annotations

import importlib
import json

import pytest
from browser_helpers import assert_page_whole, choose, wait_idle
from playwright.sync_api import expect

from grpo_lab.rundir.layout import write_json_atomic

pytestmark = pytest.mark.browser
cli = importlib.import_module("grpo_lab.rundir.import")
NAME = "hostile-import"
PROMPT = "p`1 ![t](http://t.example/p.png)"  # short and on one line: also its own prompt id
LONG = "x" * 1_000_000  # the most an import takes (importers/limits.py MAX_TEXT_CHARS)
expect.set_options(timeout=60_000)


@pytest.fixture(scope="module")
def hostile(server, tmp_path_factory):
    url, runs = server
    dump = tmp_path_factory.mktemp("hostile-dump")
    rows = [{"input": PROMPT, "output": out, "score": score, "gts": "2", "acc": score, "uid": "u"}
            for out, score in (("1 [l](http://t.example/l)", 0.0), (LONG, 1.0))]
    (dump / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert cli.main([str(dump), "--name", NAME, "--runs-dir", str(runs)]) == 0
    status = json.loads((runs / NAME / "status.json").read_text())
    write_json_atomic(runs / NAME / "status.json", {**status, "error": "boom ![e](http://t.example/e.png)"})
    return url


def watch_requests(page) -> list[str]:
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if "t.example" in request.url else None)
    return asked


def test_groups_shows_hostile_text_as_text_and_a_long_completion_cut(hostile, page):
    asked = watch_requests(page)
    page.goto(f"{hostile}/groups?run={NAME}")
    wait_idle(page)
    expect(page.locator("h3").filter(has_text="p`1 ![t](http://t.example/p.png)")).to_be_visible()  # the id, whole
    table = page.locator("table.grpo-responses")
    expect(table).to_be_visible()
    head = table.locator("thead th").all_inner_texts()
    assert head[:3] == ["i", "A_i", "reward"] and {"acc", "gts", "answer"} <= set(head)
    a_i = table.locator("tbody tr").first.locator("td").nth(1)
    box, width = a_i.bounding_box(), page.viewport_size["width"]
    assert box is not None and box["x"] + box["width"] <= width  # on screen, whatever the completion's size
    assert table.evaluate("t => t.getBoundingClientRect().width") <= width
    # nothing that loads or opens t.example; the page's own link to the prompt's history carries the
    # id URL-encoded in its query (http%3A%2F%2Ft.example), which is text, not a link there
    assert page.locator("img[src*='//t.example'], a[href*='//t.example']").count() == 0
    assert_page_whole(page)
    assert asked == []  # no request to the image host


def test_groups_draws_a_1mb_completion_cut_and_gives_it_whole_on_request(hostile, page, tmp_path):
    """Before: the cell held all 1,000,000 characters (behind a <details>); the page took 15 s to draw."""
    page.goto(f"{hostile}/groups?run={NAME}")
    wait_idle(page)
    table = page.locator("table.grpo-responses")
    expect(table).to_be_visible()
    marker = table.locator("i.grpo-long")
    expect(marker).to_have_text("(1,000,000 characters; show all: “Whole texts” below)")
    assert len(page.content()) < 100_000  # the page holds the cut, not the text
    box = page.locator("[data-testid=stExpander]").filter(has_text="i=1 · completion · 1,000,000 characters")
    expect(box).to_have_count(1)
    box.locator("summary").click()
    wait_idle(page)
    code = box.locator("[data-testid=stCode] code")
    expect(code).to_be_visible()
    assert code.evaluate("c => c.textContent.length") == len(LONG)  # asked for: all of it
    with page.expect_download() as download:
        box.get_by_role("button", name="Download this text").click()
    saved = tmp_path / "completion.txt"
    download.value.save_as(saved)
    assert saved.read_text() == LONG
    assert_page_whole(page)


def test_runs_shows_a_hostile_error_as_text(hostile, page):
    asked = watch_requests(page)
    page.goto(hostile)
    wait_idle(page)
    choose(page.get_by_role("combobox", name="Run"), page.get_by_role("option", name=NAME, exact=True))
    wait_idle(page)
    shown = page.get_by_text("boom ![e](http")
    expect(shown).to_be_visible()
    assert shown.inner_text().replace("\u200b", "") == "Error: boom ![e](http://t.example/e.png)"  # as written
    links = page.locator("img[src*='//t.example'], a[href*='//t.example']")
    assert links.count() == 0, links.first.evaluate("e => e.outerHTML")
    assert asked == []
