"""The concept pages under Streamlit's AppTest: the chapter's numbers on first load, sliders that
move them as the formulas say, and numbers loaded from a real run equal to what the trainer logged.

Run from the project root with `.venv/bin/python -m pytest` (the root must be importable).
"""

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app_helpers import page_alone, rerun
from grpo_lab.rundir.layout import RunPaths, visible_parts

ROOT = Path(__file__).resolve().parents[2]
# Rewards with a spread in every group: correctness is rare for an untrained model, a length
# penalty is not.
FIXTURE_CONFIG = (
    "rewards: {correctness: 1.0, length: 1.0}\n"
    "reward_params: {length: {max_len: 2, penalty_per_unit: 0.25}}\n"
)


def page(name: str, lang: str = "en") -> AppTest:
    return page_alone(name, lang)


def text_of(at: AppTest) -> str:
    return "\n".join(str(e.value) for kind in ("markdown", "caption", "info", "success", "warning", "error")
                     for e in getattr(at, kind))


def advantages_line(at: AppTest) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("#### A = ")).removeprefix("#### A = ")


def read_table(run_dir: Path, table: str) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(p) for p in visible_parts(RunPaths(run_dir).table(table))], ignore_index=True)


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory) -> Path:
    """A real GRPO run of the trainer (a few seconds), and a copy of it relabelled as PPO."""
    root = tmp_path_factory.mktemp("runs")
    cfg = root / "fixture.yaml"
    cfg.write_text(FIXTURE_CONFIG)
    cmd = [sys.executable, "-m", "grpo_lab.trainer", "--config", str(cfg), "--runs-dir", str(root), "--name", "grpo-fx",
           "--max-steps", "2", "--prompts-per-step", "2", "--group-size", "4", "--sft-steps", "0",
           "--flush-seconds", "0"]
    done = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    cfg.unlink()
    return root


@pytest.fixture
def with_runs(runs_dir, monkeypatch) -> Path:
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs_dir))
    return runs_dir


@pytest.fixture
def no_runs(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path / "empty"))
    return tmp_path


# --- every page loads, in both languages ------------------------------------------------------

ALL = ["ppo_vs_grpo", "group_advantage", "ratio_clip", "kl_divergence", "grpo_objective", "quiz"]
TITLES = {"ppo_vs_grpo": ("PPO vs GRPO", "PPO 与 GRPO"), "group_advantage": ("Group advantage", "组内优势"),
          "ratio_clip": ("Ratio and clip", "比率与裁剪"), "kl_divergence": ("KL divergence", "KL 散度"),
          "grpo_objective": ("The GRPO objective", "GRPO 目标函数"), "quiz": ("Quiz", "小测验")}


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_page_loads(name, lang, no_runs):
    at = page(name, lang)
    assert at.title[0].value == TITLES[name][0 if lang == "en" else 1]


@pytest.mark.parametrize("lang, menu", [("en", "**Algorithm**"), ("zh", "**算法**")])
def test_ppo_page_without_runs_points_to_the_launch_forms_algorithm_menu(lang, menu, no_runs):
    at = page("ppo_vs_grpo", lang)
    assert menu in text_of(at)


# --- group advantage --------------------------------------------------------------------------


def test_group_first_load_shows_the_chapter_numbers(no_runs):
    at = page("group_advantage")
    assert advantages_line(at) == "-1.07, 0.00, -0.53, 1.60"
    assert [m.value for m in at.metric] == ["3.000", "1.871"]
    table = at.dataframe[0].value
    assert table["A_i"].round(2).tolist() == [-1.07, 0.0, -0.53, 1.6]


def test_group_sliders_follow_the_formula(no_runs):
    at = page("group_advantage")
    at.slider(key="group_r4").set_value(10.0)
    rerun(at)
    rewards = [1.0, 3.0, 2.0, 10.0]
    mean = sum(rewards) / 4
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / 4)
    assert advantages_line(at) == ", ".join(f"{(r - mean) / std:.2f}" for r in rewards)
    assert [m.value for m in at.metric] == [f"{mean:.3f}", f"{std:.3f}"]


def test_group_size_adds_sliders(no_runs):
    at = page("group_advantage")
    at.slider(key="group_G").set_value(6)
    rerun(at)
    assert len(at.dataframe[0].value) == 6
    assert at.slider(key="group_r6").value == 5.0


def test_group_sample_std_toggle(no_runs):
    at = page("group_advantage")
    at.radio(key="group_std_mode").set_value("sample")
    rerun(at)
    std = math.sqrt(14 / 3)
    assert advantages_line(at) == ", ".join(f"{(r - 3) / std:.2f}" for r in (1, 3, 2, 6))
    assert "G − 1" in text_of(at)


def test_group_equal_rewards_show_zeros_not_nan(no_runs):
    at = page("group_advantage")
    for i in range(1, 5):
        at.slider(key=f"group_r{i}").set_value(2.5)
    rerun(at)
    assert advantages_line(at) == "0.00, 0.00, 0.00, 0.00"
    assert at.dataframe[0].value["A_i"].tolist() == [0.0] * 4
    assert not at.dataframe[0].value.isna().any().any()
    assert [m.value for m in at.metric] == ["2.500", "0.000"]
    assert any("std = 0" in w.value for w in at.warning)


def test_group_shift_changes_the_mean_not_the_advantages(no_runs):
    at = page("group_advantage")
    at.slider(key="group_shift").set_value(2.5)
    rerun(at)
    assert at.metric[0].value == "5.500"
    assert advantages_line(at) == "-1.07, 0.00, -0.53, 1.60"


def group_page_on_run(name):
    """The group-advantage page, reading its group from run `name`."""
    at = page("group_advantage")
    at.radio(key="group_source").set_value("run")
    rerun(at)
    at.selectbox(key="group_run@en").set_value(name)
    rerun(at)
    return at


def group_of(label):
    """The group number in a picker label such as "#3 2+5"."""
    return int(label.split()[0].lstrip("#"))


def test_group_loaded_from_a_run_shows_the_logged_advantages(with_runs):
    samples = read_table(with_runs / "grpo-fx", "samples")
    at = group_page_on_run("grpo-fx")
    step = at.select_slider(key="group_step").value
    label = at.selectbox(key="group_pick").value
    logged = samples[(samples["step"] == step) & (samples["group"] == group_of(label))].sort_values("sample_idx")
    assert len(logged) == 4 and label.endswith(" " + logged["prompt_id"].iloc[0])
    table = at.dataframe[0].value
    assert table["A_i logged by the trainer"].tolist() == logged["advantage"].tolist()
    assert table["reward r_i"].tolist() == logged["reward"].tolist()
    assert table["A_i"].tolist() == pytest.approx(logged["advantage"].tolist(), abs=1e-5)
    assert advantages_line(at) == ", ".join(f"{a:.2f}".replace("-0.00", "0.00") for a in logged["advantage"])
    assert at.success and "equal the logged ones" in at.success[0].value


def test_group_every_group_of_a_run_matches(with_runs):
    samples = read_table(with_runs / "grpo-fx", "samples")
    at = group_page_on_run("grpo-fx")
    for step in sorted(samples["step"].unique()):
        at.select_slider(key="group_step").set_value(int(step))
        rerun(at)
        for label in at.selectbox(key="group_pick").options:
            at.selectbox(key="group_pick").set_value(label)
            rerun(at)
            logged = samples[(samples["step"] == step) & (samples["group"] == group_of(label))]
            assert at.dataframe[0].value["A_i logged by the trainer"].tolist() == logged["advantage"].tolist()
            assert at.success, (step, label)


def test_group_from_run_without_runs_says_how_to_make_one(no_runs):
    at = page("group_advantage")
    at.radio(key="group_source").set_value("run")
    rerun(at)
    assert any("python -m grpo_lab.trainer" in i.value for i in at.info)


def test_group_from_a_damaged_run_warns(runs_dir, tmp_path, monkeypatch):
    root = tmp_path / "runs"
    shutil.copytree(runs_dir / "grpo-fx", root / "damaged")
    (root / "damaged" / "tables" / "samples" / "part-00000009-00000009.parquet").write_bytes(b"garbage")
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(root))
    at = page("group_advantage")
    at.radio(key="group_source").set_value("run")
    rerun(at)
    assert any("could not be read" in w.value for w in at.warning)
    assert at.dataframe  # the readable parts still show


# --- ratio and clip ---------------------------------------------------------------------------


def clip_values(at: AppTest) -> dict[str, str]:
    table = at.table[0].value
    return dict(zip(table.iloc[:, 0], table.iloc[:, 1]))


def test_clip_first_load_shows_the_chapter_table(no_runs):
    at = page("ratio_clip")
    values = clip_values(at)
    assert values["ratio r = π_θ / π_old"] == "1.5000"
    assert values["clip interval [1 − ε, 1 + ε]"] == "[0.80, 1.20]"
    assert values["clip(r, 1 − ε, 1 + ε)"] == "1.2000"
    assert values["min(r · A, clip(r) · A): the objective"] == "1.2000"
    assert values["gradient through this token"].startswith("zero")
    assert [m.value for m in at.metric][:3] == ["1.500", "1.200", "1.200"]


def test_clip_sliders_follow_the_formula(no_runs):
    at = page("ratio_clip")
    at.slider(key="clip_pi_old").set_value(0.5)
    at.slider(key="clip_pi_new").set_value(0.3)
    at.slider(key="clip_adv").set_value(-2.0)
    rerun(at)
    values = clip_values(at)  # r = 0.6 < 0.8 with A < 0: clipped low
    assert values["ratio r = π_θ / π_old"] == "0.6000"
    assert values["r · A"] == "-1.2000"
    assert values["clip(r) · A"] == "-1.6000"
    assert values["min(r · A, clip(r) · A): the objective"] == "-1.6000"
    assert values["gradient through this token"].startswith("zero")
    at.slider(key="clip_eps").set_value(0.45)
    rerun(at)
    values = clip_values(at)  # now 0.6 is inside [0.55, 1.45]: the plain r*A, gradient flows
    assert values["min(r · A, clip(r) · A): the objective"] == "-1.2000"
    assert values["gradient through this token"].startswith("flows")


def test_clip_higher(no_runs):
    at = page("ratio_clip")
    at.toggle(key="clip_asym").set_value(True)
    rerun(at)
    at.slider(key="clip_eps_high").set_value(0.3)
    rerun(at)
    values = clip_values(at)
    assert values["clip interval [1 − ε, 1 + ε]"] == "[0.80, 1.30]"
    assert values["min(r · A, clip(r) · A): the objective"] == "1.3000"


def test_clip_loaded_from_a_run_shows_the_logged_token(with_runs):
    tokens = read_table(with_runs / "grpo-fx", "tokens")
    config = json.loads((with_runs / "grpo-fx" / "config.json").read_text())
    at = page("ratio_clip")
    at.radio(key="clip_source").set_value("run")
    rerun(at)
    at.selectbox(key="clip_run@en").set_value("grpo-fx")
    rerun(at)
    step = at.select_slider(key="clip_step").value
    box = at.selectbox(key="clip_token")
    rows = tokens[tokens["step"] == step].reset_index(drop=True)
    assert len(box.options) == len(rows)
    for index in (box.options.index(box.value), 0, len(rows) - 1):
        at.selectbox(key="clip_token").set_value(at.selectbox(key="clip_token").options[index])
        rerun(at)
        row = rows.iloc[index]
        values = clip_values(at)
        assert values["ratio r = π_θ / π_old"] == f"{row['ratio']:.4f}"
        eps = config["epsilon"]
        assert values["clip interval [1 − ε, 1 + ε]"] == f"[{1 - eps:.2f}, {1 + eps:.2f}]"
        assert float(values["r · A"]) == pytest.approx(row["ratio"] * row["advantage"], abs=1e-4)
        logged = at.info[0].value
        assert f"ratio **{row['ratio']:.4f}**" in logged and f"advantage **{row['advantage']:+.4f}**" in logged
        assert f"clipped **{'yes' if row['clipped'] else 'no'}**" in logged
        gradient = values["gradient through this token"]
        assert gradient.startswith("zero") == (bool(row["clipped"]) or row["advantage"] == 0)


# --- KL ---------------------------------------------------------------------------------------


def kl_metrics(at: AppTest) -> list[str]:
    return [m.value for m in at.metric]


def test_kl_first_load_shows_the_chapter_numbers(no_runs):
    at = page("kl_divergence")
    assert kl_metrics(at)[:2] == ["0.144", "0.131"]
    assert kl_metrics(at)[2] == "0.1438"


@pytest.mark.parametrize("alpha", [0.0, 0.4, 0.6])
def test_kl_slider_follows_the_definition(alpha, no_runs):
    at = page("kl_divergence")
    at.slider(key="kl_alpha").set_value(alpha)
    rerun(at)
    p, q = [0.25 + alpha, 0.75 - alpha], [0.25, 0.75]

    def kl(a, b):
        return sum(x * math.log(x / y) for x, y in zip(a, b))

    assert kl_metrics(at)[:2] == [f"{kl(p, q):.3f}", f"{kl(q, p):.3f}"]


def test_kl_estimators_beside_the_exact_value(no_runs):
    at = page("kl_divergence")
    at.slider(key="kl_n").set_value(2000)
    rerun(at)
    exact, k1, k3 = (float(v) for v in kl_metrics(at)[2:5])
    assert exact == pytest.approx(0.1438, abs=1e-4)
    assert k1 == pytest.approx(exact, abs=0.05) and k3 == pytest.approx(exact, abs=0.02)
    table = at.dataframe[0].value
    assert table["times sampled"].sum() == 2000
    assert (table["k1(x)"] < 0).any() and (table["k3(x)"] >= 0).all()


# --- the GRPO objective -----------------------------------------------------------------------


def test_objective_worked_example_agrees_with_grpo_loss(no_runs):
    at = page("grpo_objective")
    assert at.success and "grpo_loss" in at.success[0].value
    first = at.success[0].value
    at.radio(key="obj_aggregation").set_value("token")
    at.slider(key="obj_beta").set_value(0.2)
    rerun(at)
    assert at.success and at.success[0].value != first
    tokens = at.dataframe[1].value
    assert len(tokens) == 13 and tokens["clipped"].sum() == 2


def test_objective_length_view(no_runs):
    at = page("grpo_objective")
    assert any("each response weighs 50%" in m.value and "long response 80%" in m.value for m in at.markdown)
    at.slider(key="obj_long_len").set_value(36)
    rerun(at)
    assert any("long response 90%" in m.value for m in at.markdown)


# --- quiz -------------------------------------------------------------------------------------


def test_quiz_feedback(no_runs):
    at = page("quiz")
    assert len(at.radio) == 5 and all(r.value is None for r in at.radio)
    at.radio(key="quiz_structure").set_value(2)  # "removes the reference": wrong
    rerun(at)
    assert len(at.error) == 1 and "It removes the value model" in at.error[0].value
    at.radio(key="quiz_structure").set_value(1)
    at.radio(key="quiz_kl_fact").set_value(1)
    rerun(at)
    assert not at.error and len(at.success) == 2
    assert "not symmetric" in at.success[1].value
    assert any("2 of 5 right (2 answered)" in m.value for m in at.markdown)
    at.button(key="quiz_reset").click()
    rerun(at)
    assert all(r.value is None for r in at.radio) and not at.success


def test_quiz_in_chinese(no_runs):
    at = page("quiz", "zh")
    at.radio(key="quiz_clip").set_value(0)
    rerun(at)
    assert at.success and at.success[0].value.startswith("**正确。**")


# --- PPO vs GRPO ------------------------------------------------------------------------------


def test_ppo_vs_grpo_shows_measured_figures(runs_dir, tmp_path, monkeypatch):
    root = tmp_path / "runs"
    shutil.copytree(runs_dir / "grpo-fx", root / "grpo-fx")
    # A PPO run's directory has the same layout; relabel a copy so the test needs no PPO training.
    shutil.copytree(runs_dir / "grpo-fx", root / "ppo-fx")
    for name in ("config.json", "status.json"):
        path = root / "ppo-fx" / name
        data = json.loads(path.read_text())
        data["algo"] = "ppo"
        if name == "status.json":
            data.pop("peak_memory_mb", None)
            data["trained_params"] = 2 * data.get("trained_params", 1)
        path.write_text(json.dumps(data))
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(root))
    at = page("ppo_vs_grpo")
    table = at.dataframe[0].value.set_index("run")
    status = json.loads((root / "grpo-fx" / "status.json").read_text())
    assert table.loc["grpo-fx", "samples per step"] == 8  # 2 prompts x G = 4
    assert table.loc["grpo-fx", "trained parameters"] == status["trained_params"]
    assert table.loc["ppo-fx", "trained parameters"] == 2 * status["trained_params"]
    assert table.loc["grpo-fx", "seconds per step"] > 0
    assert any("ppo-fx: not logged by this run: peak memory (MB)" in c.value for c in at.caption)


def test_ppo_vs_grpo_with_one_algorithm_says_what_is_missing(with_runs):
    at = page("ppo_vs_grpo")
    assert any("No PPO run yet" in i.value for i in at.info)
    assert len(at.dataframe) == 1


def test_language_switch_defaults_to_english_and_switches():
    def app():
        import streamlit as st

        from grpo_lab.dashboard.i18n import language_switch, t

        language_switch()
        st.title(t("group.title"))

    at = AppTest.from_function(app).run()
    assert at.title[0].value == "Group advantage"
    at.sidebar.radio[0].set_value("zh")
    at.run()
    assert at.title[0].value == "组内优势"
    assert at.session_state["lang"] == "zh"
