"""Groups page: a rescore (grpo_lab/finished_runs/rescore.py) beside the run's own rewards and advantages, and a form to start one.

A rescore scores the completions a run already has with other rewards or weights; its folder,
RUN/rescores/<name>/, holds the new rewards and the advantages they give. Here the shown group's
completions get both side by side, a changed reward and a flipped advantage marked, and the rescore's
summary above. The form takes registered rewards, and `module:function` ones from the modules
GRPO_LAB_REWARD_MODULES allows, and parameters whose paths pass the launch form's rule (one function,
allowed.check_launch, over the rewards and all their parameters); it scores in this process under a
spinner (the same code as `grpo-lab-rescore`).
"""

from __future__ import annotations

import html
import math

import pandas as pd
import streamlit as st

from grpo_lab import rewards
from grpo_lab.finished_runs import rescore
from grpo_lab.launching import allowed
from grpo_lab.dashboard import markup
from grpo_lab.dashboard.i18n import t
from grpo_lab.dashboard.reading import data
from grpo_lab.rundir import rescores
from grpo_lab.rundir.reader import RunInfo

PICK_KEY = "rescore_pick"
CHANGED = "rgba(255,200,0,.45)"  # a reward the rescore changed
FLIPPED = "outline:2px solid #c0392b;outline-offset:-2px;"  # an advantage whose sign the rescore flipped: framed


def render(info: RunInfo, target: tuple[int, int], group: pd.DataFrame) -> None:
    """The rescore section of the shown group (target: step, group; group: its rows in the run)."""
    st.markdown(t("rescore.heading"))
    form(info)
    names = rescores.list_rescores(info.path)
    if not names:
        st.caption(t("rescore.none"))
        return
    if st.session_state.get(PICK_KEY) not in names:
        st.session_state[PICK_KEY] = names[0]
    name = st.selectbox(t("rescore.pick"), names, key=PICK_KEY)
    summary, problem = rescores.read_summary_checked(info.path, name)
    if summary is None:
        st.warning(t("rescore.unreadable", name=markup.md(name)) + f" ({markup.md(problem or '')})")
        return
    show_summary(summary)
    rows, problem = rescores.read_group_checked(info.path, name, *target)
    if problem:
        st.warning(t("rescore.unreadable", name=markup.md(name)) + f" ({markup.md(problem)})")
        return
    if rows.empty:
        st.caption(t("rescore.not_in_rescore", step=target[0], group=target[1]))
        return
    st.html(side_by_side(group, rows))
    if info.algo == "ppo":  # the run's A is its GAE mean; a rescore's is the group advantage GRPO would use
        st.caption(t("rescore.ppo"))


def show_summary(s: dict) -> None:
    """What the rescore changed over the whole run, as summary.json says it."""
    spec = ", ".join(f"{k}={v:g}" for k, v in (s.get("rewards") or {}).items())
    st.caption(t("rescore.spec", spec=markup.md(spec), mode=markup.md(str(s.get("std_mode"))),
                 samples=s.get("samples", 0), steps=s.get("steps", 0)))
    flips, signal, mean = s.get("sign_flips") or {}, s.get("signal") or {}, s.get("reward_mean") or {}
    c = st.columns(4)
    c[0].metric(t("rescore.changed"), f"{s.get('reward_changed', 0)} / {s.get('samples', 0)}")
    c[1].metric(t("rescore.flips"), f"{flips.get('groups', 0)}", help=t("rescore.flips_help", n=flips.get("samples", 0)))
    c[2].metric(t("rescore.signal"), f"{signal.get('run', 0)} → {signal.get('rescore', 0)}",
                help=t("rescore.signal_help", gained=signal.get("gained", 0), lost=signal.get("lost", 0)))
    c[3].metric(t("rescore.mean"), f"{_num(mean.get('run'))} → {_num(mean.get('rescore'))}")
    failed = {k: v for k, v in (s.get("errors") or {}).items() if v}
    for k, v in failed.items():
        st.warning(t("rescore.failed", reward=markup.md(k), n=v,
                     first=markup.md((s.get("first_error") or {}).get(k, ""))))


def side_by_side(group: pd.DataFrame, rows: pd.DataFrame) -> str:
    """One row per completion: the run's reward and A_i, the rescore's, its own rewards, the text.
    A changed reward and a flipped sign are tinted, so the eye finds them first."""
    merged = group.merge(rows.drop(columns=[c for c in ("prompt_id", "step", "group") if c in rows]).rename(
        columns=lambda c: f"new:{c}"), left_on="sample_idx", right_on="new:sample_idx", how="left")
    mine = [c for c in rows.columns if c.startswith("rewards/")]
    head = ["i", t("rescore.col.run_reward"), t("rescore.col.run_a"), t("rescore.col.reward"), t("rescore.col.a"),
            *[c.split("/", 1)[1] for c in mine], t("col.completion")]
    out = ['<table class="grpo-rescore" style="border-collapse:collapse;width:100%;font-size:0.9rem">',
           "<thead><tr>" + "".join(f'<th style="{markup.CELL}">{html.escape(h)}</th>' for h in head) + "</tr></thead><tbody>"]
    for _, r in merged.sort_values("sample_idx").iterrows():
        changed, flipped = bool(r.get("new:reward_changed")), bool(r.get("new:sign_flipped"))
        run_a, new_a = _float(r.get("advantage")), _float(r.get("new:advantage"))
        cells = [(str(int(r["sample_idx"])), ""), (_num(r.get("reward")), ""),
                 (_signed(run_a), f"background:{markup.BACKGROUND[markup.adv_class(run_a or 0.0)]};"),
                 (_num(r.get("new:reward")), f"background:{CHANGED};" if changed else ""),
                 (("⇅ " if flipped else "") + _signed(new_a),
                  f"background:{markup.BACKGROUND[markup.adv_class(new_a or 0.0)]};" + (FLIPPED if flipped else "")),
                 *[(_num(r.get(f"new:{c}")), "") for c in mine],
                 (f'<code>{markup.cut_text(r["completion"], False)}</code>', markup.WRAP)]
        marks = " ".join(m for m, on in (("changed", changed), ("flipped", flipped)) if on)
        out.append(f'<tr data-rescore="{marks}">'
                   + "".join(f'<td style="{markup.CELL}{style}">{c}</td>' for c, style in cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out) + f'<p style="font-size:0.8rem">{html.escape(t("rescore.legend"))}</p>'


def form(info: RunInfo) -> None:
    """Start a rescore: rewards as grpo-lab-train takes them, optional parameters and name."""
    own = info.config.get("rewards") if isinstance(info.config, dict) else None
    default = ",".join(f"{k}={v:g}" for k, v in own.items()) if isinstance(own, dict) else "correctness"
    with st.expander(t("rescore.new")):
        st.caption(t("rescore.allowed", names=", ".join(rewards.available()),
                     env=allowed.REWARD_MODULES_ENV))
        with st.form("rescore_form"):
            spec = st.text_input(t("rescore.rewards"), value=default, key="rescore_spec")
            params = st.text_input(t("rescore.params"), key="rescore_params", placeholder='{"length": {"max_len": 8}}')
            name = st.text_input(t("rescore.name"), key="rescore_name", placeholder=t("rescore.name_placeholder"))
            force = st.checkbox(t("rescore.force"), key="rescore_force")
            go = st.form_submit_button(t("rescore.start"))
    if go:
        start(info, spec, params, name, force)


def start(info: RunInfo, spec: str, params: str, name: str, force: bool) -> None:
    """Check the request as the command line does, and the modules as the launch form does; then score."""
    try:
        request = rescore.parse_request(spec, params=params or None, name=name or None, run_config=info.config)
    except rescore.RescoreError as exc:
        st.error(markup.md(str(exc)))
        return
    # the launch form's check over everything the rewards are built with: a path in reward_params
    # (an interpreter, a ratings file) is the launch form's question, not only the reward names
    refused = allowed.check_launch(request.launch_values(), data.runs_dir())
    if refused:
        st.error(markup.md(refused))
        return
    try:
        with st.spinner(t("rescore.running", name=markup.md(request.name))):
            result = rescore.rescore(info.path, request, force=force)
    except rescore.RescoreError as exc:
        st.error(markup.md(str(exc)))
        return
    st.session_state[PICK_KEY] = request.name  # drawn below: the new rescore is the one shown
    st.success(t("rescore.done", name=markup.md(request.name), n=result.summary["samples"],
                 s=f"{result.summary['seconds']:.1f}"))


def _float(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _num(v) -> str:
    f = _float(v)
    return "—" if f is None else f"{f:.3f}"


def _signed(f: float | None) -> str:
    return "—" if f is None else f"<b>{f:+.3f}</b>"
