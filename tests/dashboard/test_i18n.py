"""The dashboard's text in every language: one file per language under dashboard/locales/, the
same keys and placeholders in each, every key the code asks for present, and every training page
rendered in Chinese (AppTest, runs made by the real trainer) with no missing key and no English label."""

import json
import re
import shutil
import string
from pathlib import Path

import pytest
import yaml
from streamlit.testing.v1 import AppTest

from app_helpers import APP, live_open, open_page
from grpo_lab.dashboard import i18n
from grpo_lab.dashboard import launch_form
from grpo_lab.launching import form_fields, process_control
from grpo_lab.rundir.layout import RunPaths, write_json_atomic
from grpo_lab.rundir.writer import TableWriter
from shared_runs import copy_run, grpo_run, ppo_run  # noqa: F401 (fixtures: pytest finds them by name)

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(i18n.LOCALES.glob("*.yaml"))
CALL = re.compile(r"""\bt\(\s*["']([A-Za-z0-9_.]+)["']""")  # t("key", ...) with a literal key
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def _fields(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f}


# --- the files ------------------------------------------------------------------------------------


def test_every_language_file_has_the_same_keys():
    assert {p.stem for p in FILES} >= {"en", "zh"} and list(i18n.LANGUAGES)[0] == "en"
    english = set(i18n.texts("en"))
    for path in FILES:
        keys = set(i18n.texts(path.stem))
        assert keys == english, (path.name, sorted(english - keys)[:10], sorted(keys - english)[:10])
        assert i18n.LANGUAGES[path.stem] == i18n.texts(path.stem)["language.name"]


def test_no_key_is_written_twice_in_a_file():
    """YAML keeps the last of two equal keys without a word; a translator's duplicate must not hide."""
    class Strict(yaml.SafeLoader):
        pass

    def mapping(loader, node):
        keys = [loader.construct_object(k) for k, _ in node.value]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        assert not twice, twice
        return loader.construct_mapping(node)

    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    for path in FILES:
        assert yaml.load(path.read_text(encoding="utf-8"), Loader=Strict), path.name


def test_every_text_is_filled_in_and_has_the_english_placeholders():
    english = i18n.texts("en")
    for path in FILES:
        for key, text in i18n.texts(path.stem).items():
            assert text.strip(), (path.name, key)
            assert _fields(text) == _fields(english[key]), (path.name, key)


def test_every_key_the_code_asks_for_exists():
    used = {}
    for path in (ROOT / "grpo_lab" / "dashboard").rglob("*.py"):
        if path.name == "i18n.py":  # t() itself; its docstring's examples are not keys
            continue
        for key in CALL.findall(path.read_text(encoding="utf-8")):
            used.setdefault(key, path.relative_to(ROOT))
    assert len(used) > 300
    english = i18n.texts("en")
    assert not {k: str(p) for k, p in used.items() if k not in english}
    # keys built at run time: the launch form's option.<name>.label / .help
    for name in ["model", *launch_form.MAIN, *launch_form.MORE]:
        assert f"option.{name}.label" in english and f"option.{name}.help" in english, name
    # the Groups page's note on each std mode the trainer has
    from grpo_lab.dashboard.views.groups.group_math import std_note_key
    from grpo_lab.objective.options import STD_MODES

    assert all(std_note_key(mode) in english for mode in STD_MODES)


def test_option_help_in_english_is_the_trainers_own():
    """The form's help texts are grpo_lab/trainer/config.py's (python -m grpo_lab.trainer --help), read from there
    (i18n.option_help): when one changes there, have it translated in the other files."""
    fields = form_fields.config_fields()
    for name in ["model", *launch_form.MAIN, *launch_form.MORE]:
        assert i18n.texts("en")[f"option.{name}.help"] == fields[name]["help"], name



def test_option_help_is_written_once_and_every_other_language_translates_each_option():
    """en.yaml holds no option help (config.py's is the English); every other file has one for each option
    the form shows, and none for an option it no longer shows."""
    shown = {f"option.{name}.help" for name in ["model", "task", *launch_form.MAIN, *launch_form.MORE]}
    assert not [k for k in i18n.file_texts("en") if k.startswith("option.") and k.endswith(".help")]
    assert {k for k in i18n.texts("en") if k.startswith("option.") and k.endswith(".help")} == shown
    for path in FILES:
        if path.stem != "en":
            helps = {k for k in i18n.file_texts(path.stem) if k.startswith("option.") and k.endswith(".help")}
            assert helps == shown, (path.name, sorted(shown - helps), sorted(helps - shown))

def test_a_missing_key_raises():
    with pytest.raises(KeyError, match="no.such.key"):
        i18n.t("no.such.key")
    assert i18n.t("groups.pick", n=3, step=7) == "Group (3 at step 7)"


def test_a_key_a_newer_english_file_has_shows_in_english(monkeypatch):
    texts = i18n.texts

    def behind(code):  # a language file one key behind the English one
        return {k: v for k, v in texts(code).items() if k != "nav.live"} if code == "zh" else texts(code)

    monkeypatch.setattr(i18n, "texts", behind)
    monkeypatch.setattr(i18n, "lang", lambda: "zh")
    assert i18n.t("nav.live") == "Live" and i18n.t("nav.runs") == texts("zh")["nav.runs"]


# --- every training page in Chinese ---------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory, grpo_run, ppo_run):
    """The session's GRPO (6 steps) and PPO (4 steps) runs, and a copy of the GRPO run the run doctor stopped."""
    root = tmp_path_factory.mktemp("runs")
    copy_run(grpo_run, root, "alpha")
    copy_run(ppo_run, root, "ppo")
    sick = root / "sick"
    shutil.copytree(root / "alpha", sick, ignore=shutil.ignore_patterns("checkpoints"))
    events = TableWriter(RunPaths(sick).table("events"), 100)
    events.append({"step": [2, 3], "kind": ["grad_explosion", "kl_explosion"], "severity": ["warning", "critical"],
                   "message": ["grad/norm 240 before clipping", "kl/mean 1.8e+14 nats per token"],
                   "suggestion": ["lower lr", "lower lr"]})
    events.flush()
    status = json.loads((sick / "status.json").read_text())
    write_json_atomic(sick / "status.json", {**status, "state": "stopped", "findings": {"warning": 1, "critical": 1},
                                             "stop_reason": "doctor (kl_explosion, critical) at step 3"})
    return root


@pytest.fixture
def zh(runs, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))

    def open_in_chinese(page, run=None, **state):
        return rendered(open_page(page, run, lang="zh", **state))
    return open_in_chinese


def rendered(at: AppTest) -> AppTest:
    """No exception, no page that gave up (a missing key would), every heading and label in Chinese."""
    assert not at.exception, [e.message for e in at.exception]
    failed = "遇到了无法处理的问题"  # ui.page_failed: what ui.guard shows for an exception, a KeyError included
    assert not [e.value for e in at.error if failed in str(e.value) or "KeyError" in str(e.value)]
    labels = [e.value for e in (*at.title, *at.subheader)] + [e.label for e in (*at.expander, *at.button)]
    for kind in ("selectbox", "multiselect", "number_input", "text_input", "slider", "toggle", "segmented_control",
                 "metric", "radio"):
        labels += [e.label for e in at.get(kind)]
    english = [s for s in labels if s and not CJK.search(s) and s not in ("G", "Language / 语言")]
    assert not english, english
    return at


def chart_titles(at: AppTest) -> list[str]:
    titles = [json.loads(c.proto.spec).get("title") for c in at.get("vega_lite_chart")]
    return [t["text"] if isinstance(t, dict) else t for t in titles]


def test_runs_in_chinese(zh):
    at = zh("runs", runs_pick="alpha")
    assert at.title[0].value == "🗂️ 运行列表" and "运行目录" in at.caption[0].value
    assert at.dataframe[0].value["name"].tolist()  # the frame keeps its column names; headings are translated
    assert any("已完成" in s for s in at.dataframe[0].value["state"])
    assert any(b.label == "开始训练" for b in at.button)
    at.text_input(key="runs_filter").set_value("no such run").run()
    assert "没有符合筛选条件的运行。" in [c.value for c in at.caption]


def test_runs_launch_form_in_chinese(zh, monkeypatch):
    monkeypatch.setattr(process_control, "start_process", lambda *a: pytest.fail("nothing may start on bad input"))
    at = zh("runs")
    assert at.selectbox(key="launch_preset@zh").options[0].startswith("内置演示")
    at.number_input(key="launch_0_group_size").set_value(1)
    at.button[[b.label for b in at.button].index("开始训练")].click().run()
    assert any(str(e.value).startswith("未启动：") for e in rendered(at).error)


def test_no_runs_in_chinese(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["lang"] = "zh"
    at.run()
    assert rendered(at).info[0].value.startswith("还没有训练运行")
    assert at.button(key="launch_demo").label == "🚀 启动演示运行"


@pytest.mark.parametrize("run", ["alpha", "ppo"])
def test_live_in_chinese(zh, run, runs):
    at = zh("live", run, **live_open())
    titles = chart_titles(at)
    last = json.loads((runs / run / "status.json").read_text())["step"]  # the histogram opens at the last step
    assert {"奖励", "裁剪比例", "各步的比率直方图", f"第 {last} 步的比率直方图"} <= set(titles)
    assert ("价值模型（PPO）" in titles) == (run == "ppo") and at.expander[-1].label == "比率直方图"
    assert any("采样器就是训练器" in c.value for c in at.caption)  # the trainer samples itself: one line, no charts
    assert at.expander[0].label.startswith("策略更新：优势分布 · ")
    at.segmented_control(key="live_x").set_value("wall").run()
    rendered(at)


def test_live_run_doctor_in_chinese(zh):
    banner = " ".join(str(e.value) for e in zh("live", "sick").error)
    assert "已被运行诊断停止" in banner and "第 3 步 · kl_explosion" in banner


@pytest.mark.parametrize("mode", ["step", "no_signal", "positive", "negative", "prompt"])
def test_groups_in_chinese(zh, mode):
    at = zh("groups", "alpha", groups_mode=mode)
    assert at.title[0].value == "👥 组查看"
    if mode == "positive":
        assert any("重算的优势与记录的一致" in s.value for s in at.success)
        table = next(d.value for d in at.dataframe if "r_i" in d.value.columns)
        assert set(table["effect"]) <= {"推高：概率变大", "压低：概率变小", "不变：等于均值", "不变：组内没有差异", "不变：未打分"}
    for token_mode in ("clipped", "kl", "advantage"):
        if at.get("segmented_control") and any(s.key == "groups_token_mode" for s in at.segmented_control):
            at.segmented_control(key="groups_token_mode").set_value(token_mode).run()
            rendered(at)


def test_groups_search_and_ppo_in_chinese(zh):
    at = zh("groups", "alpha", groups_mode="search")
    at.text_input(key="groups_search").set_value("no such text").run()
    assert "没有回答包含这段文本。" in [c.value for c in rendered(at).caption]
    at = zh("groups", "ppo")
    assert any(i.value.startswith("这是一个 PPO 运行") for i in at.info)


def test_compare_in_chinese(zh):
    at = zh("compare", "alpha", cmp_runs=["alpha", "ppo"])
    assert at.title[0].value == "⚖️ 运行对比" and len(at.get("vega_lite_chart")) == 4
    assert {"摘要", "配置：取值不同的选项", "同一提示词的回答，并排对比"} <= {s.value for s in at.subheader}
    assert at.dataframe[0].value["run"].tolist() == ["alpha", "ppo"]
