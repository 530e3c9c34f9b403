"""Each training page under Streamlit's AppTest, on runs made by the real trainer, and on damaged
copies of them: the page shows what it can, says what is wrong, and never shows a traceback."""

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from streamlit.testing.v1 import AppTest

from app_helpers import APP, DASHBOARD, charts, html_bodies, live_open, texts

from grpo_lab.dashboard import pages
from grpo_lab.rundir.layout import RunPaths, part_name, visible_parts, write_json_atomic
from grpo_lab.rundir.writer import TableWriter
from shared_runs import copy_run, grpo_run  # noqa: F401 (a fixture: pytest finds it by name)
from trainer_helpers import SMALL, run_trainer


@pytest.fixture(scope="module")
def runs(tmp_path_factory, grpo_run):
    """alpha (the session's GRPO run: 6 steps, a checkpoint every 3) and beta from the trainer, then
    damaged and PPO-shaped copies of alpha."""
    root = tmp_path_factory.mktemp("runs")
    alpha = copy_run(grpo_run, root, "alpha")
    # beta differs from alpha in exactly beta, epsilon, max_steps and seed (the Compare test's diff)
    done = run_trainer(root, "beta", *SMALL, "--max-steps", "4", "--checkpoint-every", "3", "--beta", "0",
                       "--seed", "1", "--epsilon", "0.3")
    assert done.returncode == 0, done.stderr[-2000:]

    (root / "empty").mkdir()
    half = root / "half"
    half.mkdir()
    shutil.copy(alpha / "config.json", half / "config.json")
    write_json_atomic(half / "status.json", {"state": "starting", "pid": 2 ** 22 + 4321, "step": 0, "total_steps": 8,
                                             "started_at": 1.7e9, "name": "half"})

    corrupt = root / "corrupt"
    shutil.copytree(alpha, corrupt, ignore=shutil.ignore_patterns("checkpoints"))
    for table in ("scalars", "samples", "histograms", "tokens"):
        (RunPaths(corrupt).table(table) / part_name(90, 91)).write_bytes(b"PAR1 not really parquet")
    hist = visible_parts(RunPaths(corrupt).table("histograms"))[0]
    hist.write_bytes(hist.read_bytes()[: hist.stat().st_size // 2])  # truncated mid-file

    weird = root / "weird"  # hand-edited files: every value of the wrong type
    shutil.copytree(alpha, weird, ignore=shutil.ignore_patterns("checkpoints"))
    write_json_atomic(weird / "status.json", {"state": 5, "step": "x", "total_steps": None, "pid": "abc",
                                              "started_at": "yesterday", "error": ["odd"]})
    write_json_atomic(weird / "config.json", {**json.loads((alpha / "config.json").read_text()),
                                              "epsilon": "wide", "std_mode": 3, "token_detail_groups": "two"})

    notables = root / "notables"
    shutil.copytree(alpha, notables, ignore=shutil.ignore_patterns("checkpoints", "tables"))

    sick = root / "sick"  # as the run doctor leaves a run it stopped: events, counts, the reason
    shutil.copytree(alpha, sick, ignore=shutil.ignore_patterns("checkpoints"))
    events = TableWriter(RunPaths(sick).table("events"), 100)
    events.append({"step": [2, 3], "kind": ["grad_explosion", "kl_explosion"], "severity": ["warning", "critical"],
                   "message": ["grad/norm 240 before clipping", "kl/mean 1.8e+14 nats per token"],
                   "suggestion": ["lower lr", "learning rate 0.002 is high for a 135M-parameter pretrained model"]})
    events.flush()
    status = json.loads((sick / "status.json").read_text())
    write_json_atomic(sick / "status.json", {**status, "state": "stopped", "findings": {"warning": 1, "critical": 1},
                                             "stop_reason": "doctor (kl_explosion, critical) at step 3: kl/mean 1.8e+14"})

    ppo = root / "ppo"
    shutil.copytree(alpha, ppo, ignore=shutil.ignore_patterns("checkpoints"))
    config = json.loads((ppo / "config.json").read_text())
    write_json_atomic(ppo / "config.json", {**config, "algo": "ppo", "name": "ppo"})
    part = visible_parts(RunPaths(ppo).table("tokens"))[0]
    tokens = pq.read_table(part)
    per_token = [0.5 if p % 2 == 0 else -0.5 for p in tokens.column("position").to_pylist()]  # varies along the text
    pq.write_table(tokens.set_column(tokens.schema.get_field_index("advantage"), "advantage", pa.array(per_token)), part)
    return root


# --- Runs ---------------------------------------------------------------------------------------


def test_runs_lists_every_run_with_state_and_progress(app):
    at = app("runs")
    df = at.dataframe[0].value
    assert set(df["name"]) == {"alpha", "beta", "empty", "half", "corrupt", "notables", "ppo", "weird", "sick"}
    assert df[df["name"] == "sick"].iloc[0]["doctor"] == "🛑 1 ⚠️ 1" and df[df["name"] == "alpha"].iloc[0]["doctor"] == ""
    alpha = df[df["name"] == "alpha"].iloc[0]
    assert "finished" in alpha["state"] and alpha["progress"] == 100 and alpha["step"] == "6 / 6"
    assert "failed" in df[df["name"] == "half"].iloc[0]["state"]  # 'starting' but its process is gone
    assert not at.error or all("Error" in e.value for e in at.error)


def test_runs_filters_by_name_and_shows_log_and_error(app):
    at = app("runs")
    at.text_input(key="runs_filter").set_value("alp").run()
    assert at.dataframe[0].value["name"].tolist() == ["alpha"]
    assert "finished at step 6" in texts(at.code)
    at.text_input(key="runs_filter").set_value("half").run()
    assert "ended without reporting" in texts(at.error)


def test_first_visit_with_no_runs_offers_the_demo_in_one_click(tmp_path, monkeypatch):
    from grpo_lab.launching import launcher

    started = []
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    monkeypatch.setattr(launcher, "launch", lambda values, runs_dir, processes=1: started.append((values, runs_dir)) or ("demo", 1))
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert at.selectbox(key="launch_preset@en").value == "Built-in demo: tiny model, single-digit addition (about a minute on a CPU)"
    at.button(key="launch_demo").click().run()
    assert started == [({"name": "demo"}, tmp_path.resolve())]


def test_the_launch_form_validates_before_starting(app, monkeypatch):
    from grpo_lab.launching import process_control

    monkeypatch.setattr(process_control, "start_process", lambda *a: pytest.fail("nothing may start on bad input"))
    at = app("runs")
    at.number_input(key="launch_0_group_size").set_value(1)
    at.button[[b.label for b in at.button].index("Start training")].click().run()
    assert "group_size: must be >= 2" in texts(at.error)
    at.text_input(key="launch_0_name").set_value("alpha")
    at.number_input(key="launch_0_group_size").set_value(8)
    at.button[[b.label for b in at.button].index("Start training")].click().run()
    assert "already exists" in texts(at.error)


def test_a_preset_fills_the_form_and_its_hidden_options_still_apply(app, monkeypatch):
    from grpo_lab.launching import launcher, presets

    started = []
    monkeypatch.setattr(launcher, "launch", lambda values, runs_dir, processes=1: started.append(values) or ("x", 1))
    at = app("runs")
    label = next(name for name in presets.presets() if name.startswith("SmolLM2"))
    n = list(presets.presets()).index(label)  # the form's widgets are keyed by the preset's place
    at.selectbox(key="launch_preset@en").set_value(label).run()
    assert at.text_input(key=f"launch_{n}_model").value == "smollm2"
    assert at.number_input(key=f"launch_{n}_pretrained_lr").value == pytest.approx(2e-5)
    assert at.text_input(key=f"launch_{n}_name").value == "smollm2"
    at.number_input(key=f"launch_{n}_max_steps").set_value(3)
    at.button[[b.label for b in at.button].index("Start training")].click().run()
    values = started[0]
    assert values["task"] == "word_problems" and values["max_steps"] == 3
    assert values["eval_prompts"] == 24  # in the preset, not in the form


def test_the_launch_form_follows_the_model_with_its_defaults(app):
    at = app("runs")
    assert at.number_input(key="launch_0_builtin_lr").value == pytest.approx(2e-3)
    at.text_input(key="launch_0_model").set_value("HuggingFaceTB/SmolLM2-135M-Instruct").run()
    assert at.number_input(key="launch_0_pretrained_lr").value == pytest.approx(1e-5)
    assert at.number_input(key="launch_0_pretrained_sft_steps").value == 0
    assert at.number_input(key="launch_0_pretrained_max_new_tokens").value == 128
    assert "the defaults for a pretrained model" in texts(at.caption)


def test_runs_shows_each_option_with_where_it_came_from(app):
    at = app("runs", runs_pick="alpha")
    options = next(d.value for d in at.dataframe if "source" in d.value.columns)
    by_name = options.set_index("option")
    assert by_name.loc["lr", "source"] == "model default (built-in)"
    assert by_name.loc["max_steps", "source"] == "command line" and by_name.loc["seed", "source"] == "default"


# --- Live ---------------------------------------------------------------------------------------


def chart_titles(at) -> list[str]:
    titles = [json.loads(c.proto.spec).get("title") for c in charts(at)]
    return [t["text"] if isinstance(t, dict) else t for t in titles]


def test_live_draws_every_panel_and_the_ratio_histogram(app):
    at = app("live", "alpha", **live_open())
    names = chart_titles(at)
    for expected in ("Reward", "Advantage spread", "KL to reference", "Clip fraction", "Ratio pi_theta / pi_old",
                     "Entropy", "Losses", "Gradient norm", "Completion length", "Throughput", "Where the step goes",
                     "Ratio histogram over steps", "Ratio histogram at step 6"):
        assert expected in names
    assert not at.warning and not at.error
    phases = next(json.loads(c.proto.spec) for c in charts(at) if "Where the step goes" in str(json.loads(c.proto.spec)["title"]))
    assert phases["layer"][0]["mark"]["type"] == "area" and phases["layer"][0]["encoding"]["y"]["stack"] == "zero"
    at.segmented_control(key="live_x").set_value("wall").run()
    at.slider(key="live_smoothing").set_value(0.0).run()
    assert not at.exception and len(charts(at)) == len(names)


def test_live_first_paint_is_the_overview_and_a_section_is_drawn_once_opened(app):
    at = app("live", "alpha")
    assert sorted(chart_titles(at)) == ["Clip fraction", "KL to reference", "Reward"]
    labels = [e.label for e in at.expander]
    # the trainer samples itself: no Sampler vs trainer sections of round-off noise, one line instead
    assert labels == ["Policy update: Advantage spread · Groups with no signal · Ratio pi_theta / pi_old · Entropy · "
                      "Losses · Gradient norm", "Completions: Completion length · Truncated",
                      "Speed: Throughput · Where the step goes",
                      "Is the reward honest? Which reward decides the advantage's sign · Each reward's share of the "
                      "total · Reward against length (within groups) · Top completions failing the strict check · "
                      "Groups all solved, none solved · Reward spread within groups",
                      "Ratio histogram"]
    assert any("the sampler is the trainer, no gap" in c.value for c in at.caption)
    at.session_state["live_open_speed"] = True  # what clicking "Speed" does
    at.run()
    assert sorted(chart_titles(at)) == ["Clip fraction", "KL to reference", "Reward", "Throughput",
                                        "Where the step goes"]
    assert "Where the step goes" in str([c.proto.spec for c in at.expander[2].get("vega_lite_chart")])
    at.session_state["live_open_histogram"] = True
    at.run()
    assert {"Ratio histogram over steps", "Ratio histogram at step 6"} <= set(chart_titles(at))
    at.number_input(key="live_hist_step").set_value(3).run()
    assert "Ratio histogram at step 3" in chart_titles(at)
    at.session_state["live_open_speed"] = False
    at.run()
    assert "Throughput" not in chart_titles(at) and not at.exception


def test_live_picked_metrics_are_drawn_with_the_overview(app):
    at = app("live", "alpha")
    at.multiselect(key="live_extra").set_value(["lr"]).run()
    assert "More metrics" in chart_titles(at) and len(charts(at)) == 4


def test_live_ratio_panel_marks_the_clip_bounds(app):
    at = app("live", "beta", **live_open("update"))  # epsilon 0.3
    spec = next(json.loads(c.proto.spec) for c in charts(at)
                if json.loads(c.proto.spec).get("title", {}).get("text") == "Ratio pi_theta / pi_old")
    assert [layer["data"]["values"][0]["y"] for layer in spec["layer"]
            if "values" in layer.get("data", {})] == pytest.approx([0.7, 1.3])


@pytest.mark.parametrize("run, expected", [
    ("empty", "status.json is missing"),
    ("half", "No step has been logged yet"),
    ("corrupt", "could not be read"),
    ("notables", "is missing"),
])
def test_live_on_damaged_runs_warns_instead_of_failing(app, run, expected):
    at = app("live", run)
    shown = texts(at.warning) + texts(at.info) + texts(at.error)
    assert expected in shown
    assert "hit a problem" not in shown


def test_live_on_a_hand_edited_run_with_values_of_the_wrong_type(app):
    at = app("live", "weird", **live_open())
    assert len(charts(at)) >= 12 and "hit a problem" not in texts(at.error)


def test_live_on_a_corrupt_run_still_draws_what_it_can(app):
    at = app("live", "corrupt", **live_open())
    assert len(charts(at)) >= 12 and "scalars/part-00000090-00000091.parquet" in texts(at.warning)


def test_live_shows_the_run_doctors_findings(app):
    at = app("live", "sick")
    banner = texts(at.error)
    assert "Stopped by the run doctor" in banner and "step 3 · kl_explosion" in banner
    assert "learning rate 0.002 is high" in banner and "step 2 · grad_explosion" in banner
    assert "run doctor" not in texts(app("live", "alpha").error)


# --- Groups -------------------------------------------------------------------------------------


def test_groups_shows_a_group_its_computation_and_the_check(app):
    at = app("groups", "alpha", groups_mode="positive")
    body = html_bodies(at)
    assert 'data-adv="pos"' in body and 'data-adv="neg"' in body
    assert "Recomputed advantages equal the logged ones" in texts(at.success)
    table = next(d.value for d in at.dataframe if "r_i" in d.value.columns)
    assert list(table.columns) == ["i", "r_i", "mean", "std", "r_i - mean", "A_i (recomputed)", "A_i (logged)", "effect"]
    # the correctness verifier's reasons, one per response, agreeing with the logged scores
    why = next(d.value for d in at.dataframe if "decided by" in d.value.columns)
    logged = next(d.value for d in at.dataframe if "r_i" in d.value.columns)
    assert len(why) == len(logged) and why["score"].tolist() == logged["r_i"].tolist()
    assert why["reference read"].notna().all()


def test_groups_browse_by_step_with_tokens(app):
    at = app("groups", "alpha")
    at.number_input(key="groups_step").set_value(3).run()
    assert "Step 3" in texts(at.subheader)
    body = html_bodies(at)
    assert "grpo-tokens" in body or "No token detail" in texts(at.caption)
    for mode in ("clipped", "kl"):
        at.segmented_control(key="groups_token_mode").set_value(mode).run()
        assert not at.exception


def test_groups_filters_search_and_same_prompt(app, runs):
    at = app("groups", "alpha", groups_mode="search")
    at.text_input(key="groups_search").set_value("no such text").run()
    assert "No completion contains" in texts(at.caption)
    samples = pq.read_table(visible_parts(RunPaths(runs / "alpha").table("samples"))[0]).to_pandas()
    word = next(c for c in samples["completion"] if c.strip())
    at.text_input(key="groups_search").set_value(word.upper()).run()
    hits = at.dataframe[0].value
    assert len(hits) and hits["completion"].str.contains(word, case=False, regex=False).all()
    assert "Recomputed advantages equal" in texts(at.success)  # the first hit's group is opened
    for mode in ("no_signal", "negative", "prompt"):
        at.segmented_control(key="groups_mode").set_value(mode).run()
        assert not at.exception and not at.error


def test_groups_colours_ppo_tokens_by_their_own_advantage(app):
    at = app("groups", "ppo")
    at.number_input(key="groups_step").set_value(1).run()
    assert "This run is PPO" in texts(at.info) and not at.success  # no GRPO check on PPO advantages
    if "grpo-tokens" in html_bodies(at):
        assert at.segmented_control(key="groups_token_mode").value == "advantage"
        assert "rgba(26,152,80" in html_bodies(at) and "rgba(215,48,39" in html_bodies(at)


@pytest.mark.parametrize("run", ["empty", "half", "corrupt", "notables", "weird"])
def test_groups_on_damaged_runs(app, run):
    at = app("groups", run)
    assert "hit a problem" not in texts(at.error)


# --- Compare ------------------------------------------------------------------------------------


def test_compare_overlays_runs_and_diffs_only_differing_options(app):
    at = app("compare", "alpha", cmp_runs=["alpha", "beta"])
    assert len(charts(at)) == 4
    spec = json.loads(charts(at)[0].proto.spec)
    assert spec["encoding"]["color"]["scale"]["domain"] == ["alpha", "beta"]  # one colour per run, every chart
    summary = at.dataframe[0].value
    assert summary["run"].tolist() == ["alpha", "beta"] and summary["best reward"].notna().all()
    diff = at.dataframe[1].value
    assert set(diff["option"]) == {"beta", "epsilon", "max_steps", "seed"}
    assert html_bodies(at).count("grpo-responses") == 2


def test_compare_with_a_damaged_run(app):
    at = app("compare", "alpha", cmp_runs=["alpha", "corrupt", "empty"])
    assert "could not be read" in texts(at.warning)
    assert "hit a problem" not in texts(at.error)


def test_the_entry_file_runs_outside_streamlit_too():
    """After a page ran (AppTest, a server), sys.modules["__main__"] is app.py, and a process started
    with multiprocessing's spawn runs it again as __mp_main__, outside Streamlit, where a Page has
    nothing set: building the navigation must not read one back (the address aliases did)."""
    import runpy

    runpy.run_path(APP, run_name="__mp_main__")


def test_the_pages_table_names_every_page_file_at_its_own_address():
    """pages.py is the one list of pages that the navigation and every link read: a file in app_pages/
    it lacks would be served nowhere, and two pages at one address would hide one."""
    assert {p.stem for p in (DASHBOARD / pages.FOLDER).glob("*.py")} == set(pages.PAGES)
    assert len({p.address for p in pages.PAGES.values()}) == len(pages.PAGES)
