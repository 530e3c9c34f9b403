"""Curve to groups: a step's groups ordered by their share of a Live metric, the address that
carries it, the run doctor's links to it, and Live's "why is my loss 0" line.

The orderings are checked on a run with known figures (tests/groups_order_helpers.py: each ordering has
its own first group), as new runs write them, as older runs and imports do (no per-sample columns: the
tokens table's figures for the groups with token detail), and with neither; the loss line against the
real trainer's logged loss at ratio 1.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from app_helpers import live_open, open_page
from groups_order_helpers import FIGURES, TOP, G, write_run
from grpo_lab.dashboard.i18n import LOCALES
from grpo_lab.dashboard.views.live import curve_link, loss_note
from grpo_lab.objective.functions import aggregate
from grpo_lab.objective.options import LOSS_AGGREGATIONS
from grpo_lab.rundir import group_order
from grpo_lab.rundir import metrics as registry
from grpo_lab.rundir import query as rq

import yaml


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("order-runs")
    write_run(root, "new")
    write_run(root, "old", per_sample=False)  # as before per-sample columns: token detail for groups 0, 1
    write_run(root, "bare", per_sample=False, token_groups=())
    write_run(root, "sick", events={"step": [2, 3, 3], "kind": ["kl_explosion", "grad_explosion", "non_finite"],
                                    "severity": ["critical", "warning", "critical"],
                                    "message": ["kl/mean 1e14", "grad/norm 240", "loss/total not finite"],
                                    "suggestion": ["lower lr", "lower lr", "lower lr"]})
    return root


def figures(run_dir, step: int = 2) -> pd.DataFrame:
    """group_order's figures as the dashboard computes them (queries.group_figures, without Streamlit)."""
    columns = set(rq.query(run_dir, "samples", "SELECT * FROM {src} LIMIT 0")[0].columns)
    groups, problems = rq.query(run_dir, "samples", group_order.figures_sql(columns), {"step": step})
    assert problems == []
    missing = {k for k in group_order.TOKEN_FIGURES if k not in groups or groups[k].isna().all()}
    tokens = set(rq.query(run_dir, "tokens", "SELECT * FROM {src} LIMIT 0")[0].columns)
    sql = group_order.token_figures_sql(tokens, missing)
    if sql:
        groups = group_order.merge_token_figures(groups, rq.query(run_dir, "tokens", sql, {"step": step})[0])
    return groups


# --- the declarations ---------------------------------------------------------------------------

def test_every_ordering_names_registered_metrics_and_has_its_texts():
    names = [n for o in group_order.ORDERS.values() for n in o.metrics] + list(group_order.FINDING_METRICS.values())
    assert [n for n in names if n not in registry.ROWS] == []
    for code in ("en", "zh"):
        texts = yaml.safe_load((LOCALES / f"{code}.yaml").read_text(encoding="utf-8"))
        keys = [f"groups_order.{k}" for k in group_order.SORTS]
        keys += [f"groups_order.{part}.{k}" for k in group_order.ORDERS for part in ("short", "explain")]
        assert [k for k in keys if k not in texts] == []


def test_each_live_panel_of_a_symptom_opens_its_ordering():
    panel = {p.id: p.names for p in registry.PANELS}
    opened = {pid: group_order.sort_for_panel(panel[pid]) for pid in panel}
    assert {k: opened[k] for k in ("kl", "clip", "no_signal", "entropy", "ratio", "length", "truncated", "reward",
                                   "tool_errors", "losses", "grad", "throughput")} == {
        "kl": "kl", "clip": "clip", "no_signal": "no_signal", "entropy": "entropy", "ratio": "ratio_max",
        "length": "length", "truncated": "truncated", "reward": "reward", "tool_errors": "tool_errors",
        "losses": "no_signal", "grad": None, "throughput": None}
    assert curve_link.address("r", 140, ("rewards/correctness/mean",)) == {"run": "r", "step": "140", "sort": "reward"}


# --- the figures and the orders -----------------------------------------------------------------

def test_each_ordering_puts_the_group_with_the_largest_share_first(runs):
    groups = figures(runs / "new")
    for sort, top in TOP.items():
        assert group_order.available(groups, sort), sort
        assert int(group_order.ordered(groups, sort)["group"].iloc[0]) == top, sort
    kl = groups.set_index("group")["kl"]
    assert kl.to_dict() == pytest.approx({g: f[0] for g, f in FIGURES.items()})  # token-weighted, equal per sample
    assert groups.set_index("group")["clip"].to_dict() == {g: f[1] for g, f in FIGURES.items()}
    assert groups.set_index("group")["truncated"].to_dict() == {g: f[5] for g, f in FIGURES.items()}


def test_an_older_run_orders_by_what_it_has(runs):
    """No clipped_tokens / entropy_mean / ratio_max: clipped tokens from clip_frac x length, the largest ratio
    from the tokens table (groups 0 and 1 only), entropy not at all."""
    groups = figures(runs / "old")
    assert groups.set_index("group")["clip"].to_dict() == {g: f[1] for g, f in FIGURES.items()}
    ratio = groups.set_index("group")["ratio_max"]
    assert ratio[[0, 1]].tolist() == [FIGURES[0][3], FIGURES[1][3]] and ratio[[2, 3]].isna().all()
    assert group_order.ordered(groups, "ratio_max")["group"].tolist()[:2] == [1, 0]
    assert not group_order.available(groups, "entropy")
    bare = figures(runs / "bare")
    assert not group_order.available(bare, "ratio_max") and group_order.available(bare, "kl")


@pytest.mark.parametrize("sort", sorted(TOP))
def test_the_address_opens_groups_at_its_step_in_its_order(runs, monkeypatch, sort):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    at = open_page("groups", "new")
    at.query_params["step"], at.query_params["sort"] = "2", sort
    at.run()
    assert not at.exception
    assert at.number_input(key="groups_step").value == 2
    pick = at.selectbox(key=f"groups_pick_2_{sort}")
    assert pick.value == TOP[sort] and pick.options[0].startswith(f"#{TOP[sort]} ")
    assert at.selectbox(key="groups_sort@en").value == sort


def test_the_picker_leads_once_the_address_is_read_and_the_address_follows(runs, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    at = open_page("groups", "new")
    at.query_params["step"], at.query_params["sort"] = "2", "kl"
    at.run()
    at.selectbox(key="groups_sort@en").set_value("length").run()
    assert at.selectbox(key="groups_pick_2_length").value == TOP["length"]
    assert at.query_params["sort"] == "length" and at.query_params["step"] == "2"
    at.number_input(key="groups_step").set_value(3).run()
    assert at.query_params["step"] == "3" and at.selectbox(key="groups_sort@en").value == "length"


def test_an_ordering_the_run_cannot_give_is_one_line(runs, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    at = open_page("groups", "old")
    at.query_params["step"], at.query_params["sort"] = "2", "entropy"
    at.run()
    assert not at.exception and not at.error
    assert any("not available for this run" in c.value for c in at.caption)
    assert at.selectbox(key="groups_pick_2") is not None  # the step's own order, as without an ordering
    at.query_params["sort"] = "nonsense"
    at.run()
    assert any("sort 'nonsense' is not an ordering" in w.value for w in at.warning)


def test_live_links_each_doctor_finding_to_the_ordering_of_its_cause(runs, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    at = open_page("live", "sick")
    links = {p.proto.label: p.proto.query_string for p in at.get("page_link") if "its groups by" in p.proto.label}
    assert links == {"Step 3 · non_finite: its groups by group index (the step's order)": "run=sick&step=3",
                     "Step 3 · grad_explosion: its groups by group index (the step's order)": "run=sick&step=3",
                     "Step 2 · kl_explosion: its groups by KL (mean per-token KL)": "run=sick&step=2&sort=kl"}


# --- why is my loss 0 ---------------------------------------------------------------------------

@pytest.mark.parametrize("mode", LOSS_AGGREGATIONS)
def test_the_expected_loss_is_the_objectives_aggregate_at_ratio_one(mode):
    rng = np.random.default_rng(0)
    adv, lengths = rng.normal(size=12), rng.integers(0, 9, 12)
    mask = torch.arange(8)[None, :] < torch.tensor(lengths)[:, None]
    per_token = torch.tensor(adv)[:, None].expand(12, 8)
    want = -float(aggregate(per_token, mask, mode, max_len=8))
    assert loss_note.expected_policy_loss(adv, lengths, mode, max_len=8) == pytest.approx(want, abs=1e-12)


def test_live_says_under_the_loss_what_it_should_be_and_how_much_signal_the_step_had(runs, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(runs))
    at = open_page("live", "new", **live_open("update"))
    note = [c.value for c in at.caption if c.value.startswith("Why the loss is near 0")]
    assert len(note) == 1
    with_signal = sum(G for f in FIGURES.values() if len(set(f[6])) > 1)
    assert "is 0 by construction" in note[0] and "sequence aggregation" in note[0]
    assert f"75% of the completions ({with_signal} of {G * len(FIGURES)})" in note[0]
    assert "≈ 0.012 (β = 0.04)" in note[0]  # beta x kl/mean at step 3 (0.3)


def test_the_expected_loss_is_what_the_trainer_logs_at_ratio_one(tiny_run):
    """One pass, no reference: the trainer's loss/policy is the expected loss exactly (token aggregation:
    the length weighting moves it off 0)."""
    # a length reward on every character: completions of different lengths differ in reward whatever the model
    # draws, so groups have a signal (correctness alone left every group of some draws without one)
    run = tiny_run("token", max_steps=3, passes=1, beta=0, loss_aggregation="token", rewards="correctness,length",
                   reward_params='{"length": {"max_len": 0}}')
    scalars, _ = rq.query(run, "scalars", 'SELECT step, "loss/policy" AS logged FROM {src} ORDER BY step')
    for step, logged in zip(scalars["step"], scalars["logged"]):
        rows, _ = rq.query(run, "samples", "SELECT advantage, length, truncated, dropped FROM {src} WHERE step = $s",
                           {"s": int(step)})
        note = loss_note.step_loss(rows, int(step), "token", None, mask_truncated=False)
        assert note.expected == pytest.approx(logged, abs=1e-5)
    assert scalars["logged"].abs().max() > 1e-4  # not 0 = 0: the weighting showed


def test_a_click_on_a_wall_time_curve_picks_the_step_logged_nearest_that_minute():
    scalars = pd.DataFrame({"step": [1, 2, 3, 4], "time": [100.0, 160.0, 400.0, 430.0], "wall_s": [10.0, 70, 310, 340]})
    # minutes since the start (90 s before the first row): 0.17, 1.17, 5.17, 5.67
    assert [curve_link.step_at(scalars, "wall", x) for x in (0.0, 1.5, 4.0, 5.6)] == [1, 2, 3, 4]
    assert curve_link.step_at(scalars, "step", 2.4) == 2


def test_the_first_groups_share_of_the_step_is_their_mass_over_the_steps(runs):
    """KL: each group's kl_mean x length x G (0.2, 0.24, 9.6, 0.4); by KL the first three (2, 3, 1) carry
    10.24 of 10.44. Clip: clipped tokens (1, 9, 2, 0): the first (group 1) 9 of 12. No signal: group 3 is
    the step's only group without signal."""
    groups = figures(runs / "new")
    assert group_order.carried(group_order.ordered(groups, "kl"), "kl", 3) == pytest.approx(10.24 / 10.44)
    assert group_order.carried(group_order.ordered(groups, "clip"), "clip", 1) == pytest.approx(9 / 12)
    assert group_order.carried(group_order.ordered(groups, "no_signal"), "no_signal", 1) == 1.0
    assert group_order.carried(group_order.ordered(groups, "ratio_max"), "ratio_max", 1) is None
