"""The "GRPO and its variants" page and its helpers: the page loads in both languages, its numbers
are the trainer's `grpo_loss`, the sliders move them as the variants say (a group with equal
rewards, a truncated long answer, the first pass), a group from a real run, and the quiz.

Run from the project root with `.venv/bin/python -m pytest` (the root must be importable).
"""

import math
import re
from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from app_helpers import page_alone, rerun
from grpo_lab.dashboard import i18n
from grpo_lab.dashboard.concepts import quiz, variants
from grpo_lab.objective.functions import group_advantages, grpo_loss, mask_truncated
from trainer_helpers import read_table, run_trainer

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "grpo_lab" / "dashboard" / "app_pages" / "grpo_variants.py"


def page(lang: str = "en") -> AppTest:
    return page_alone("grpo_variants", lang, timeout=90)


def lines(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown]


def summary(at: AppTest):
    return at.dataframe[0].value


@pytest.fixture
def no_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path / "empty"))


# --- helpers: the trainer's numbers ---------------------------------------------------------------


@pytest.mark.parametrize("key", list(variants.VARIANTS))
@pytest.mark.parametrize("long_len", [5, variants.MAX_LEN])
def test_each_variant_is_grpo_loss_with_its_options(key, long_len):
    group = variants.demo_group((1.0, 0.0, 1.0, 1.0), long_len, drift=0.1)
    res = variants.outcome(group, variants.VARIANTS[key])
    v = variants.VARIANTS[key]
    adv = group_advantages(torch.tensor([group.rewards]), v.std_mode).advantages[0].double()
    logp = group.logp_new.clone().requires_grad_(True)
    direct = grpo_loss(logp, group.logp_old, None, adv, group.mask, v.loss_settings(variants.MAX_LEN),
                       truncated=group.truncated if v.mask_truncated else None)
    direct.loss.backward()
    assert res.loss == pytest.approx(float(direct.loss.detach()), abs=1e-9)
    assert torch.allclose(res.push, -logp.grad * group.mask)


def test_the_default_group():
    group = variants.demo_group()
    assert group.lengths == [2, 3, 6, variants.DEFAULT_LONG_LEN]
    assert group.truncated.tolist() == [False, False, False, False]
    cut = variants.demo_group(long_len=variants.MAX_LEN)
    assert cut.truncated.tolist() == [False, False, False, True] and cut.tokens[3][-1] != variants.EOS
    results = variants.outcomes(group)
    assert results["chapter"].advantages == pytest.approx([1.0, -1.0, 1.0, -1.0])
    assert results["dr_grpo"].advantages == pytest.approx([0.5, -0.5, 0.5, -0.5])  # centred only
    # the chapter's clip stops o3's first token (r = e^0.4 = 1.49, A > 0) and nothing else
    assert results["chapter"].clipped.nonzero().tolist() == [[2, 0]]


def test_token_weights_are_each_normaliser():
    group = variants.demo_group(long_len=8)
    results = variants.outcomes(group)
    lengths = group.lengths  # 2, 3, 6, 8: 19 tokens
    for i, n in enumerate(lengths):
        assert results["chapter"].weight[i, 0].item() == pytest.approx(1 / (4 * n))
        assert results["dapo"].weight[i, 0].item() == pytest.approx(1 / 19)
        assert results["dr_grpo"].weight[i, 0].item() == pytest.approx(1 / (4 * variants.MAX_LEN))


def test_equal_rewards_drop_the_group_only_under_dynamic_sampling():
    results = variants.outcomes(variants.demo_group((1.0, 1.0, 1.0, 1.0)))
    assert results["dapo"].dropped and math.isnan(results["dapo"].loss)
    for key in ("chapter", "dr_grpo", "gspo"):
        assert not results[key].dropped and results[key].push.abs().sum() == 0


def test_first_pass_gspo_pushes_as_the_chapter():
    results = variants.outcomes(variants.demo_group(drift=0.0))
    assert torch.allclose(results["gspo"].push, results["chapter"].push, atol=1e-12)
    assert not results["gspo"].clipped.any()


def test_long_answer_per_token_push():
    frame = variants.long_answer_frame(list(variants.DEFAULT_REWARDS), {k: k for k in variants.VARIANTS})
    per = frame.pivot(index="len", columns="variant", values="per_token")
    # the chapter: A / (G |o4|), shrinking with length; Dr. GRPO: constant; DAPO: 0 once truncated
    assert per.loc[4, "chapter"] == pytest.approx(-1 / 16) and per.loc[8, "chapter"] == pytest.approx(-1 / 32)
    assert per.loc[4, "dr_grpo"] == pytest.approx(per.loc[12, "dr_grpo"]) == pytest.approx(-0.5 / 64)
    assert per.loc[variants.MAX_LEN, "dapo"] == 0.0 and per.loc[variants.MAX_LEN - 1, "dapo"] < 0


def test_zero_std_probability():
    assert variants.zero_std_probability(0.5, 4) == pytest.approx(2 / 16)
    assert variants.zero_std_probability(1.0, 8) == 1.0


def test_batch_std_table():
    table = variants.scale_table([1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0],
                                 {"group": "g", "this": "this", "other": "other", "response": "o", "reward": "r"})
    assert table["A · group"].round(3).tolist()[:4] == [1.732, -0.577, -0.577, -0.577]
    assert table["A · batch"].round(3).tolist()[:4] == [1.549, -0.516, -0.516, -0.516]
    assert table["A · none"].tolist()[:4] == [0.75, -0.25, -0.25, -0.25]
    assert table["A · group"].tolist()[4:] == [0.0] * 4 and table["g"].tolist() == ["this"] * 4 + ["other"] * 4


# --- the page -----------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_page_loads_in_both_languages(lang, no_runs):
    at = page(lang)
    assert at.title[0].value == ("GRPO and its variants", "GRPO 及其变体")[lang == "zh"]
    assert len(at.table) == 1 and len(at.dataframe) == 3  # options; summary, clip table, advantage scale
    assert len(at.radio) == 1 + len(quiz.VARIANT_QUESTIONS)
    names = [i18n.texts(lang)[f"var.name.{k}"] for k in variants.VARIANTS]
    assert all(any(m.startswith(f"**{n}**") for m in lines(at)) for n in names)


def test_first_load_shows_each_variant(no_runs):
    at = page()
    table = summary(at)
    assert table["The chapter's GRPO · A"].tolist() == pytest.approx([1.0, -1.0, 1.0, -1.0])
    assert table["Dr. GRPO · A"].tolist() == pytest.approx([0.5, -0.5, 0.5, -0.5])
    text = "\n".join(lines(at))
    assert "**The chapter's GRPO**: loss" in text and "the clip stops 1 of 23 tokens" in text
    assert "**GSPO**: loss" in text


def test_equal_rewards_are_dropped_by_dapo(no_runs):
    at = page()
    for i in (2, 4):
        at.slider(key=f"var_r{i}").set_value(1.0)
    rerun(at)
    assert any(m.startswith("**DAPO**: the rewards are all equal") for m in lines(at))
    assert at.warning and "All rewards of this group are equal" in at.warning[0].value
    assert all(a == 0 for a in summary(at)["The chapter's GRPO · A"])


def test_truncated_long_answer_is_masked_by_dapo_only(no_runs):
    at = page()
    at.slider(key="var_long_len").set_value(variants.MAX_LEN)
    at.slider(key="var_r4").set_value(1.0)  # scored right by its last number, though cut
    rerun(at)
    assert any("it is truncated" in c.value for c in at.caption)
    table = summary(at)
    assert table.loc[3, "DAPO · push per token"] == 0.0
    assert table.loc[3, "The chapter's GRPO · push per token"] > 0  # the chapter reinforces it
    assert any(m.startswith("**DAPO**") and "of the tokens are out of the loss" in m and "59%" in m
               for m in lines(at))  # o4's 16 of the group's 2 + 3 + 6 + 16 tokens


def test_first_pass_gspo_equals_the_chapter_on_the_page(no_runs):
    at = page()
    at.slider(key="var_drift").set_value(0.0)
    rerun(at)
    table = summary(at)
    assert table["GSPO · push per token"].tolist() == pytest.approx(
        table["The chapter's GRPO · push per token"].tolist())
    assert all("the clip stops 0 of" in m for m in lines(at) if m.startswith("**"))


def test_quiz_questions(no_runs):
    at = page()
    at.radio(key="quiz_var_equal").set_value(1)
    at.radio(key="quiz_var_gspo").set_value(0)
    rerun(at)
    assert len(at.success) == 1 and "Dynamic sampling throws such groups away" in at.success[0].value
    assert len(at.error) == 1 and "One ratio per response" in at.error[0].value


def test_quiz_in_chinese(no_runs):
    at = page("zh")
    at.radio(key="quiz_var_length").set_value(0)
    rerun(at)
    assert at.success and at.success[0].value.startswith("**正确。**")


def test_every_text_key_of_the_page_exists():
    used = set()
    for path in (PAGE, ROOT / "grpo_lab" / "dashboard" / "concepts" / "variants.py"):
        used |= set(re.findall(r"""\bt\(\s*f?["']([a-z0-9_.]+)["']""", path.read_text()))
    keys = ([f"var.name.{k}" for k in variants.VARIANTS]
            + [f"var.val.std.{v.std_mode}" for v in variants.VARIANTS.values()]
            + [f"var.val.agg.{v.aggregation}" for v in variants.VARIANTS.values()]
            + [f"var.val.level.{v.importance_level}" for v in variants.VARIANTS.values()]
            + [f"var.val.{kind}.{state}" for kind, states in (("trunc", ("kept", "masked")),
                                                               ("equal", ("kept", "dropped"))) for state in states])
    for qid, n, _ in quiz.VARIANT_QUESTIONS:
        keys += [f"quiz.{qid}.q", f"quiz.{qid}.why"] + [f"quiz.{qid}.o{i + 1}" for i in range(n)]
    missing = sorted(k for k in used | set(keys) if k not in i18n.texts("en"))
    assert not missing


# --- a group of a real run ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    cfg = root / "fixture.yaml"
    cfg.write_text("rewards: {correctness: 1.0, length: 1.0}\n"
                   "reward_params: {length: {max_len: 2, penalty_per_unit: 0.25}}\n")
    done = run_trainer(root, "grpo-var", "--config", str(cfg), "--max-steps", "2", "--prompts-per-step", "2",
                       "--group-size", "4", "--sft-steps", "0", "--flush-seconds", "0")
    assert done.returncode == 0, done.stderr[-2000:]
    cfg.unlink()
    return root


def test_a_group_from_a_run(runs_dir, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs_dir))
    at = page()
    at.radio(key="var_source").set_value("run")
    rerun(at)
    table = summary(at)
    samples = read_table(runs_dir / "grpo-var", "samples")
    logged = samples[samples["advantage"] != 0].groupby(["step", "prompt_id"], sort=False)
    # the page opens on a group with a signal; its chapter advantages are the logged ones
    matches = [g for _, g in logged if g["reward"].round(6).tolist() == table["reward"].round(6).tolist()]
    assert matches
    assert table["The chapter's GRPO · A"].tolist() == pytest.approx(matches[0]["advantage"].tolist(), abs=1e-5)
    assert table["|o_i|"].tolist() == matches[0]["length"].tolist()
    assert any("Step " in m and "max_new_tokens = 4" in m for m in lines(at))


def test_a_run_group_uses_the_logged_token_ratios(runs_dir):
    samples = read_table(runs_dir / "grpo-var", "samples")
    tokens = read_table(runs_dir / "grpo-var", "tokens")
    first = tokens.iloc[0]
    rows = samples[(samples["step"] == first["step"]) & (samples["prompt_id"] == first["prompt_id"])]
    mine = tokens[(tokens["step"] == first["step"]) & (tokens["prompt_id"] == first["prompt_id"])]
    group = variants.run_group(rows.sort_values("sample_idx"), 4, mine)
    ratio = variants.outcome(group, variants.VARIANTS["chapter"]).ratio
    for _, tok in mine.iterrows():
        i = rows.sort_values("sample_idx")["sample_idx"].tolist().index(tok["sample_idx"])
        assert ratio[i, int(tok["position"])].item() == pytest.approx(float(tok["ratio"]), rel=1e-5)


def test_masking_matches_the_objective_function():
    group = variants.demo_group(long_len=variants.MAX_LEN)
    res = variants.outcome(group, variants.VARIANTS["dapo"])
    assert torch.equal(res.loss_mask, mask_truncated(group.mask, group.truncated))


# --- the presets hold the page's variants -----------------------------------------------------------


@pytest.mark.parametrize("key", list(variants.VARIANTS))
def test_each_preset_file_is_the_page_variant(key):
    from grpo_lab.launching import presets
    from grpo_lab.trainer.config import from_dict, read_config_file

    path = ROOT / "grpo_lab" / "configs" / variants.PRESET_FILES[key]
    values = read_config_file(str(path))
    cfg = from_dict({**values, "name": "preset", "runs_dir": str(path.parent)})
    wanted = variants.VARIANTS[key].config_values()
    assert {k: getattr(cfg, k) for k in wanted} == wanted
    assert presets._label(path).startswith("GRPO variants: ")
    assert presets.presets()[presets._label(path)] == values  # a launch-form preset


def test_a_group_dropped_by_dynamic_sampling(tmp_path, monkeypatch):
    cfg = tmp_path / "flat.yaml"  # every reward 0: dynamic sampling drops every group
    cfg.write_text("rewards: {length: 1.0}\nreward_params: {length: {max_len: 100}}\n")
    done = run_trainer(tmp_path, "ds-flat", "--config", str(cfg), "--max-steps", "1", "--prompts-per-step", "2",
                       "--group-size", "4", "--sft-steps", "0", "--flush-seconds", "0", "--dynamic-sampling", "true",
                       "--dynamic-sampling-rounds", "0")
    assert done.returncode == 0, done.stderr[-2000:]
    cfg.unlink()
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(tmp_path))
    at = page()
    at.radio(key="var_source").set_value("run")
    rerun(at)
    assert any("The run dropped this group" in c.value for c in at.caption)
    assert any(m.startswith("**DAPO**: the rewards are all equal") for m in lines(at))
