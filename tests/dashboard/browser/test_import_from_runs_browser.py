"""The Runs page imports a finished verl (or TRL) run, in a real browser, through the importer's own
checks: a dump inside the data folders becomes a run listed at once; a folder outside them, or one that
is no run, is refused in one line and nothing is written. Both languages."""

from __future__ import annotations

import json
import os

import pytest
from playwright.sync_api import expect

from browser_helpers import literal, locale, open_expander, press, streamlit_server, wait_idle
from variants_helpers import write_run


@pytest.fixture(scope="module")
def import_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("import")
    runs, dumps = root / "runs", root / "dumps"
    runs.mkdir()
    write_run(runs, "k0", "", "", 0, 0.5, steps=3)
    dump = dumps / "verl-dump"
    dump.mkdir(parents=True)
    for step in (1, 2):
        rows = [{"input": f"{p}+1=", "output": f"{p + k % 2}", "score": float(k % 2), "step": step, "uid": f"{step}-{p}"}
                for p in range(2) for k in range(4)]
        (dump / f"{step}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (dumps / "not-a-run").mkdir()
    before = os.environ.get("GRPO_LAB_DATA_DIRS")
    os.environ["GRPO_LAB_DATA_DIRS"] = str(dumps)  # the server (started next) may read the dumps
    try:
        with streamlit_server(runs) as url:
            yield url, runs, dumps
    finally:
        if before is None:
            os.environ.pop("GRPO_LAB_DATA_DIRS")
        else:
            os.environ["GRPO_LAB_DATA_DIRS"] = before


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_import_a_verl_run_from_the_runs_page(import_server, page, traffic, lang):
    url, runs, dumps = import_server
    words = locale(lang)
    page.goto(url + ("/?lang=zh" if lang == "zh" else "/"))
    wait_idle(page)
    open_expander(page, words["import.expander"])
    source = page.get_by_label(words["import.source"][:12], exact=False)
    name = page.get_by_label(words["import.name"], exact=True)
    button = page.get_by_role("button", name=words["import.button"], exact=True)

    for folder, why in ((dumps / "not-a-run", "expected a TRL output folder"), ("/etc", literal("import.outside", lang)[:12])):
        source.fill(str(folder))
        name.fill(f"refused-{lang}")
        press(traffic, button)
        expect(page.get_by_test_id("stAlert").filter(has_text=why)).to_be_visible()
        assert not (runs / f"refused-{lang}").exists()

    source.fill(str(dumps / "verl-dump"))
    name.fill(f"from-verl-{lang}")
    press(traffic, button)
    expect(page.get_by_test_id("stAlert").filter(has_text=f"from-verl-{lang}")).to_be_visible()
    assert (runs / f"from-verl-{lang}" / "config.json").exists()
    expect(page.get_by_text(f"from-verl-{lang}").first).to_be_visible()
