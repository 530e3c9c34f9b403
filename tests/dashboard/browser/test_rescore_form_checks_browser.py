"""The Groups page's rescore form in a real browser, sent the payloads that once ran a program as the server's
user: an interpreter named in code_tests' parameters (sandboxed, and unsandboxed as that user) and a ratings
file outside the data folders. Each is refused in one line; the program's marker file never appears and no
rescore is written."""

from __future__ import annotations

import json

import pytest
from browser_helpers import locale, press, streamlit_server, wait_idle
from run_sources import imported_verl_run
from playwright.sync_api import expect

pytestmark = pytest.mark.browser
expect.set_options(timeout=60_000)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("rescore-checks-browser")
    imported_verl_run(root)
    program = root / "elsewhere" / "python3"
    program.parent.mkdir()
    program.write_text(f"#!/bin/sh\necho ran >> {root / 'elsewhere' / 'ran.marker'}\n")
    program.chmod(0o755)
    with streamlit_server(root / "runs") as url:
        yield url, root / "runs" / "verl", program, root / "elsewhere" / "ran.marker"


PAYLOADS = {
    "interpreter": ("code_tests", lambda p: {"code_tests": {"column": "answer", "python": str(p)}},
                    "reward_params.code_tests.python"),
    "unsandboxed": ("code_tests", lambda p: {"code_tests": {"column": "answer", "python": str(p),
                                                            "allow_unsandboxed": True, "user": None}},
                    "reward_params.code_tests.python"),
    "ratings": ("human_feedback", lambda p: {"human_feedback": {"path": str(p.parent / "r.jsonl")}},
                "reward_params.human_feedback.path"),
}


@pytest.mark.parametrize("case", sorted(PAYLOADS))
def test_the_rescore_form_refuses_the_payload_and_nothing_runs(served, page, traffic, case):
    url, run, program, marker = served
    spec, params, says = PAYLOADS[case]
    words = locale("en")
    page.goto(f"{url}/groups?run=verl")
    wait_idle(page)
    page.get_by_text(words["rescore.new"], exact=True).click()
    page.get_by_label(words["rescore.rewards"]).fill(spec)
    page.get_by_label(words["rescore.params"]).fill(json.dumps(params(program)))
    page.get_by_label(words["rescore.name"]).fill(f"payload-{case}")
    press(traffic, page.get_by_role("button", name=words["rescore.start"]))
    expect(page.get_by_text(says, exact=False).first).to_be_visible()
    wait_idle(page)
    assert not marker.exists()
    assert not (run / "rescores" / f"payload-{case}").exists()
