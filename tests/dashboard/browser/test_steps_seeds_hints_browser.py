"""Three small things a first-time user missed, in a real browser, in English and in Chinese: on Groups, one
step back or on and a jump to the next doctor finding (its step, its ordering, the address following); on
Compare, "Add 2 seeds to each" for single-seed runs, confirmed, queued with their options and new seeds, and
said; on Live, the reward chart saying what is normal. Runs written without a trainer, one slot held by a
running run so that nothing queued starts."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from browser_helpers import assert_page_whole, locale, press, streamlit_server, to_chinese, wait_idle
from playwright.sync_api import expect
from queue_helpers import set_state
from variants_helpers import write_run as write_scalars_run

from grpo_lab.launching import form_checks, launch_queue, launch_records
from grpo_lab.launching.keys import KEY_DIR_ENV
from grpo_lab.trainer.config import from_dict

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from groups_order_helpers import TOP, write_run  # noqa: E402

pytestmark = pytest.mark.browser
expect.set_options(timeout=60_000)
NAME = "found"  # steps 1-3; the doctor found no signal at step 1 and a KL explosion at step 3
EVENTS = {"step": [1, 3, 3], "kind": ["no_signal", "no_signal", "kl_explosion"],
          "severity": ["info", "info", "critical"],
          "message": ["every group scored alike", "every group scored alike", "kl/mean 47.9 nats per token"],
          "suggestion": ["-", "-", "lower the learning rate"]}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("steps-seeds")
    runs = base / "runs"
    runs.mkdir()
    write_run(runs, NAME, events=EVENTS)
    for lang in ("en", "zh"):  # two single-seed configurations per language: beta 0.04 and beta 0
        for name in (f"{lang}-a", f"{lang}-b"):
            write_scalars_run(runs, name, "", "", 0, 0.5)
        config = json.loads((runs / f"{lang}-b" / "config.json").read_text())
        (runs / f"{lang}-b" / "config.json").write_text(json.dumps({**config, "beta": 0.0}))
    with pytest.MonkeyPatch.context() as mp:
        # the server inherits these: queue entries signed with a key outside the runs folder, and the one
        # slot held by a running run (its pid this test process), so every entry waits
        mp.setenv(KEY_DIR_ENV, str(base / "keys"))
        mp.setenv(launch_queue.MAX_RUNS_ENV, "1")
        write_scalars_run(runs, "busy", "", "", 0, 0.5)
        set_state(runs, "busy", "running")
        with streamlit_server(runs) as url:
            yield url, runs


def open_page(page, address: str, lang: str, heading_key: str) -> dict[str, str]:
    page.goto(address)
    wait_idle(page)
    if lang == "zh":
        to_chinese(page, locale("zh")[heading_key])
    return locale(lang)


def picked_group(page, words):
    return page.get_by_role("combobox", name=re.compile("^" + re.escape(words["groups.pick"].split("{")[0]))).first


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_groups_steps_back_and_on_and_jumps_to_a_finding_in_its_ordering(served, page, traffic, lang):
    url, _ = served
    words = open_page(page, f"{url}/groups?run={NAME}&step=2", lang, "nav.groups")
    for button, step in (("groups.next_step", 3), ("groups.prev_step", 2), ("groups.prev_step", 1)):
        press(traffic, page.get_by_role("button", name=words[button], exact=True))
        expect(page.get_by_role("spinbutton").first).to_have_value(str(step))
        page.wait_for_url(re.compile(rf"[?&]step={step}(&|$)"))
        wait_idle(page)
    expect(page.get_by_role("button", name=words["groups.prev_step"], exact=True)).to_be_disabled()  # the first
    expect(page.get_by_role("button", name=words["groups.prev_finding_none"], exact=True)).to_be_disabled()
    # step 3's worst finding (the critical one) opens its ordering: KL, the group with the most KL first
    press(traffic, page.get_by_role("button", name=words["groups.next_finding"].format(step=3, kind="kl_explosion")))
    page.wait_for_url(re.compile(r"(?=.*[?&]step=3)(?=.*[?&]sort=kl)"))
    expect(picked_group(page, words)).to_have_value(re.compile(rf"^#{TOP['kl']} "))
    expect(page.get_by_text(words["groups_order.explain.kl"])).to_be_visible()
    expect(page.get_by_text(re.compile(re.escape(words["groups.finding_here"].split("{kind}")[0].split("}")[-1])
                                       + r"kl_explosion"))).to_be_visible()
    # a step on keeps the ordering, and the address says both
    press(traffic, page.get_by_role("button", name=words["groups.prev_step"], exact=True))
    page.wait_for_url(re.compile(r"(?=.*[?&]step=2)(?=.*[?&]sort=kl)"))
    expect(page.get_by_text(words["groups_order.explain.kl"])).to_be_visible()
    assert_page_whole(page, chinese=lang == "zh")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_compare_adds_seeds_to_single_seed_configs_through_the_queue(served, page, traffic, lang):
    url, runs = served
    words = open_page(page, f"{url}/compare?runs={lang}-a,{lang}-b", lang, "nav.compare")
    press(traffic, page.get_by_role("button", name=words["compare.more_seeds"].format(n=2)))
    names = [f"{lang}-a-s1", f"{lang}-a-s2", f"{lang}-b-s1", f"{lang}-b-s2"]
    expect(page.get_by_text(re.compile(re.escape(names[0])))).to_be_visible()  # the confirmation names them
    assert not [n for n in names if (runs / launch_records.LAUNCH_DIR / f"{n}.json").exists()]  # nothing before it
    press(traffic, page.get_by_role("button", name=words["compare.more_seeds_yes"].format(n=4)))
    done = page.get_by_test_id("stAlert").filter(has_text=words["compare.more_seeds_done"].format(n=4))
    for name in names:
        expect(done).to_contain_text(name)
    expect(done).to_contain_text(words["compare.more_seeds_queued"])
    for name in names:  # queued with the run's options and a new seed
        entry = json.loads((runs / launch_records.LAUNCH_DIR / f"{name}.json").read_text())
        values = from_dict({**form_checks.parse_trainer_args(entry["argv"]), "runs_dir": str(runs)})
        assert entry["queued"] and values.seed == int(name[-1])
        assert values.beta == (0.0 if "-b-" in name else 0.04)
    assert_page_whole(page, chinese=lang == "zh")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_lives_reward_chart_says_what_is_normal(served, page, lang):
    url, _ = served
    words = open_page(page, f"{url}/live?run={NAME}", lang, "nav.live")
    chart = page.locator("[data-testid=stVegaLiteChart]").filter(
        has=page.locator(f"[aria-label=\"Title text '{words['panel.reward.title']}'\"]")).first
    subtitle = chart.locator("[aria-label^='Subtitle text']")
    expect(subtitle).to_be_attached()
    said = re.sub(r"\s", "", subtitle.get_attribute("aria-label"))
    assert re.sub(r"\s", "", words["panel.reward.normal"])[:40] in said, said
