"""The concept demos' helpers: the chapter's numbers, the edge cases, reading runs that are damaged,
and the English / Chinese text."""

import json
import math
import re
import string
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_lab.dashboard import i18n
from grpo_lab.rundir.reader import list_runs
from grpo_lab.dashboard.concepts import clip, from_run, group, kl, quiz, structure, worked


# --- group advantage --------------------------------------------------------------------------


def test_group_chapter_example():
    res = group.compute(list(group.CHAPTER_REWARDS))
    assert [group.fmt(a) for a in res.advantages] == ["-1.07", "0.00", "-0.53", "1.60"]
    assert res.mean == pytest.approx(3.0)
    assert res.std == pytest.approx(math.sqrt(3.5))


def test_group_sample_std_divides_by_g_minus_1():
    res = group.compute([1.0, 3.0, 2.0, 6.0], "sample")
    assert res.std == pytest.approx(math.sqrt(14 / 3))
    assert res.advantages[3] == pytest.approx(3 / math.sqrt(14 / 3), abs=1e-5)


def test_group_equal_rewards_give_zeros_not_nan():
    res = group.compute([0.5] * 5)
    assert res.zero_std
    assert res.advantages == [0.0] * 5
    assert all(group.fmt(a) == "0.00" for a in res.advantages)


def test_group_shift_leaves_advantages_unchanged():
    base = group.compute([1.0, 3.0, 2.0, 6.0])
    shifted = group.compute([r + 4.5 for r in (1.0, 3.0, 2.0, 6.0)])
    assert shifted.mean == pytest.approx(base.mean + 4.5)
    assert shifted.advantages == pytest.approx(base.advantages, abs=1e-6)


def test_group_unscored_reward_is_left_out():
    res = group.compute([1.0, float("nan"), 3.0])
    assert res.mean == pytest.approx(2.0)
    assert res.advantages[1] == 0.0
    assert group.fmt(float("nan")) == "—"


def test_group_defaults_cover_g_max():
    assert [group.default_reward(i) for i in range(4)] == [1.0, 3.0, 2.0, 6.0]
    assert len({group.default_reward(i) for i in range(group.G_MAX)}) > 1


# --- ratio and clip ---------------------------------------------------------------------------


def test_clip_chapter_table():
    res = clip.compute(0.4, 0.6, 1.0, 0.2)
    assert round(res.ratio, 4) == 1.5
    assert round(res.clipped_ratio, 4) == 1.2
    assert round(res.objective, 4) == 1.2
    assert (res.low, res.high) == pytest.approx((0.8, 1.2))
    assert res.clipped_high and not res.clipped_low and res.zero_gradient


@pytest.mark.parametrize("pi_old, pi_new, adv, objective, zero_grad", [
    (0.5, 0.45, 1.0, 0.9, False),  # inside the interval: the plain r*A
    (0.5, 0.3, -1.0, -0.8, True),  # A < 0, r = 0.6 < 0.8: clipped low, flat
    (0.4, 0.6, -1.0, -1.5, False),  # A < 0, r = 1.5: the min keeps r*A, the gradient flows
    (0.5, 0.3, 1.0, 0.6, False),  # A > 0, r = 0.6: the min keeps r*A
])
def test_clip_cases(pi_old, pi_new, adv, objective, zero_grad):
    res = clip.compute(pi_old, pi_new, adv, 0.2)
    assert res.objective == pytest.approx(objective)
    assert res.zero_gradient is zero_grad
    assert res.objective == pytest.approx(min(res.unclipped, res.clipped))


def test_clip_higher_moves_only_the_upper_bound():
    res = clip.compute(0.4, 0.6, 1.0, 0.2, eps_high=0.28)
    assert (res.low, res.high) == pytest.approx((0.8, 1.28))
    assert res.objective == pytest.approx(1.28)


def test_clip_curves_are_flat_where_the_gradient_is_zero():
    df = clip.curves(1.0, 0.2)
    for panel, rows in df.groupby("panel"):
        flat = rows[rows["zero_grad"]]
        assert len(flat) and flat["objective"].nunique() == 1
        assert flat["objective"].iloc[0] == pytest.approx(1.2 if panel == "A > 0" else -0.8)
    spans = clip.shaded_spans(df).set_index("panel")
    assert spans.loc["A > 0", "x"] == pytest.approx(1.2, abs=0.01)
    assert spans.loc["A < 0", "x2"] == pytest.approx(0.8, abs=0.01)


# --- KL ---------------------------------------------------------------------------------------


def _kl(p, q):
    return sum(a * math.log(a / b) for a, b in zip(p, q) if a > 0)


def test_kl_defaults_reproduce_the_chapter():
    pq_, qp_ = kl.kl_both(kl.DEFAULT_ALPHA)
    assert kl.policy(kl.DEFAULT_ALPHA).tolist() == pytest.approx([0.5, 0.5])
    assert round(pq_, 3) == 0.144 and round(qp_, 3) == 0.131


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.4, kl.ALPHA_MAX])
def test_kl_follows_the_definition(alpha):
    p, q = [0.25 + alpha, 0.75 - alpha], list(kl.REFERENCE)
    assert kl.kl_both(alpha) == pytest.approx((_kl(p, q), _kl(q, p)))


def test_kl_estimators_average_to_the_exact_value():
    est = kl.estimate(0.25, 2000, seed=3)
    assert est.k1_mean == pytest.approx(est.exact, abs=0.05)
    assert est.k3_mean == pytest.approx(est.exact, abs=0.02)
    assert est.k3_std < est.k1_std  # k3: lower variance
    assert (est.per_outcome["k1"] < 0).any() and (est.per_outcome["k3"] >= 0).all()
    assert est.per_outcome["count"].sum() == 2000


# --- the worked objective ---------------------------------------------------------------------


@pytest.mark.parametrize("aggregation", ["sequence", "token"])
@pytest.mark.parametrize("beta, eps", [(0.04, 0.2), (0.0, 0.1), (0.3, 0.3)])
def test_worked_example_matches_grpo_loss(aggregation, beta, eps):
    ex = worked.compute(beta, eps, aggregation)
    assert ex.loss == pytest.approx(ex.loss_from_trainer, abs=1e-12)
    assert ex.responses["weight"].sum() == pytest.approx(1.0)
    assert ex.responses["A"].tolist() == pytest.approx([1.0, -1.0, -1.0, 1.0])
    # J recomputed by hand from the table
    tok = ex.tokens
    if aggregation == "sequence":
        j = tok.groupby("response")["term"].mean().mean()
    else:
        j = tok["term"].mean()
    assert ex.objective == pytest.approx(j)


def test_worked_example_has_a_token_clipped_each_way():
    tok = worked.compute().tokens
    clipped = tok[tok["clipped"]]
    assert set(zip(clipped["response"], clipped["token"])) == {("o2", "1"), ("o4", "3")}


def test_length_shares():
    shares = worked.length_shares(16)
    assert shares["sequence"] == pytest.approx({"short": 0.5, "long": 0.5, "objective": 0.0})
    assert shares["token"] == pytest.approx({"short": 0.2, "long": 0.8, "objective": -0.6})


# --- quiz, diagram ----------------------------------------------------------------------------


def test_quiz_answers_and_score():
    assert quiz.is_right("structure", None) is None
    assert quiz.is_right("structure", 1) is True
    assert quiz.is_right("structure", 0) is False
    assert quiz.score({"structure": 1, "advantage": 0}) == (1, 2)
    assert len(quiz.QUESTIONS) == 5


def test_diagram_builds_in_both_languages():
    for lang in i18n.LANGUAGES:
        labels = {k[len("ppo.node."):]: v for k, v in i18n.texts(lang).items() if k.startswith("ppo.node.")}
        labels.update({f"role_{r}": r for r in ("trained", "frozen", "none")}, ppo_title="PPO", grpo_title="GRPO")
        spec = structure.diagram(labels).to_dict()
        assert len(spec["hconcat"]) == 2


# --- text -------------------------------------------------------------------------------------


def _fields(text):
    return {f for _, f, _, _ in string.Formatter().parse(text) if f}


def test_every_text_has_both_languages_and_the_same_placeholders():
    zh = i18n.texts("zh")
    for key, en in i18n.texts("en").items():
        assert en.strip() and zh[key].strip(), key
        assert _fields(en) == _fields(zh[key]), key


def test_every_text_key_used_by_the_pages_exists():
    dashboard = Path(__file__).resolve().parents[2] / "grpo_lab" / "dashboard"
    concept_pages = ("ppo_vs_grpo", "group_advantage", "ratio_clip", "kl_divergence", "grpo_objective", "quiz")
    used = set()
    files = [dashboard / "app_pages" / f"{p}.py" for p in concept_pages] + list((dashboard / "concepts").glob("*.py"))
    for path in files:
        used |= set(re.findall(r"""\bt\(\s*["']([a-z0-9_.]+)["']""", path.read_text()))
    missing = sorted(k for k in used if k not in i18n.texts("en"))
    assert not missing
    for qid, n, _ in quiz.QUESTIONS:
        for suffix in ["q", "why"] + [f"o{i + 1}" for i in range(n)]:
            assert f"quiz.{qid}.{suffix}" in i18n.texts("en")


def test_t_defaults_to_english_outside_a_session():
    assert i18n.lang() == "en"
    assert i18n.t("group.title") == "Group advantage"
    assert i18n.t("run.none", root="x").startswith("No runs in `x`")


# --- reading runs -----------------------------------------------------------------------------


def _write_part(table_dir: Path, first: int, last: int, frame: pd.DataFrame) -> None:
    table_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False),
                   table_dir / f"part-{first:08d}-{last:08d}.parquet")


def _samples(step, pid, rewards, advs):
    return pd.DataFrame({"step": step, "prompt_id": pid, "sample_idx": list(range(len(rewards))),
                         "reward": rewards, "advantage": advs})


def test_read_table_skips_a_corrupt_part_with_a_warning(tmp_path):
    run = tmp_path / "r"
    _write_part(run / "tables" / "samples", 1, 1, _samples(1, "1+1", [1.0, 0.0], [1.0, -1.0]))
    (run / "tables" / "samples" / "part-00000002-00000002.parquet").write_bytes(b"not parquet")
    loaded = from_run.read_table(run, "samples")
    assert len(loaded.frame) == 2
    assert len(loaded.warnings) == 1 and "part-00000002" in loaded.warnings[0]


def test_read_table_of_a_missing_run_is_empty(tmp_path):
    loaded = from_run.read_table(tmp_path / "nope", "samples", columns=["step", "reward"])
    assert loaded.frame.empty and list(loaded.frame.columns) == ["step", "reward"] and not loaded.warnings


def test_read_table_filters_one_step(tmp_path):
    run = tmp_path / "r"
    _write_part(run / "tables" / "samples", 1, 2, pd.concat([
        _samples(1, "a", [1.0, 0.0], [1.0, -1.0]), _samples(2, "b", [0.0, 0.0], [0.0, 0.0])]))
    assert from_run.read_table(run, "samples", step=2).frame["prompt_id"].tolist() == ["b", "b"]
    assert from_run.steps_with(run, "samples").frame["step"].tolist() == [1, 2]


def test_a_schema1_run_gets_its_groups_derived_and_split_by_them(tmp_path):
    run = tmp_path / "r"  # no `group` column: written before schema 2, a prompt drawn twice in step 1
    _write_part(run / "tables" / "samples", 1, 1, pd.concat([
        _samples(1, "3+4", [1.0, 0.0], [1.0, -1.0]), _samples(1, "1+1", [1.0, 1.0], [0.0, 0.0]),
        _samples(1, "3+4", [0.0, 0.5], [-1.0, 1.0])], ignore_index=True))
    rows = from_run.read_table(run, "samples", step=1).frame
    assert rows["group"].tolist() == [0, 0, 1, 1, 2, 2]
    groups = from_run.split_groups(rows)
    assert [label for label, _ in groups] == ["#0 3+4", "#1 1+1", "#2 3+4"]
    assert groups[2][1]["reward"].tolist() == [0.0, 0.5]


def test_group_rewards_turns_null_into_nan():
    rewards = from_run.group_rewards(pd.DataFrame({"reward": [1.0, None, 0.5]}))
    assert rewards[0] == 1.0 and math.isnan(rewards[1]) and rewards[2] == 0.5


def test_list_runs_and_figures_tolerate_broken_files(tmp_path):
    good = tmp_path / "good"
    good.mkdir()
    (good / "config.json").write_text(json.dumps({"algo": "ppo"}))
    (good / "status.json").write_text(json.dumps({"algo": "ppo", "trained_params": 1234, "peak_memory_mb": 99.5}))
    _write_part(good / "tables" / "scalars", 1, 3, pd.DataFrame({"step": [1, 2, 3], "time/step_s": [1.0, 2.0, 9.0]}))
    _write_part(good / "tables" / "samples", 1, 2, pd.concat([_samples(1, "a", [1.0] * 3, [0.0] * 3),
                                                              _samples(2, "a", [1.0] * 3, [0.0] * 3)]))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    (broken / "status.json").write_text(json.dumps({"algo": "grpo"}))
    (tmp_path / "not-a-run").mkdir()
    runs = {r.name: r for r in list_runs(tmp_path)}  # the one run listing, rundir.reader's
    assert runs["broken"].algo == "grpo" and runs["not-a-run"].algo == "?" and runs["not-a-run"].problems
    figures, warnings = from_run.run_figures(runs["good"])
    assert figures == {"trained_params": 1234.0, "peak_memory_mb": 99.5, "seconds_per_step": 2.0,
                       "samples_per_step": 3.0}
    assert not warnings
    figures, _ = from_run.run_figures(runs["broken"])
    assert all(v is None for v in figures.values())
