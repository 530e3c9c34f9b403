"""What changes in GRPO when a rollout has tool turns: a section of the objective page.

Worked: one group of two rollouts of "123+456=". o1 calls the calculator ("calc 123+456=" is the
model's, "579" the tool's) and answers 579 (reward 1); o2 guesses 578 (reward 0). The tool's token
was not sampled from the policy, so it is context: the loss mask the trainer uses
(trainer/batch.py `loss_mask`: completion mask times 1 - tool mask) leaves it out, and the loss
is computed by the trainer's own `grpo_loss`. Changing what the tool said leaves the loss as it is;
counting the tool's token (the mistake masking avoids) changes it.

From a run: a group of a run with tools, each rollout's turns, and the credit each turn gets: every
model turn of rollout i carries its one advantage A_i, a tool turn none (`turn_credit`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pandas as pd
import streamlit as st
import torch

from grpo_lab.dashboard.concepts import run_picker
from grpo_lab.dashboard.i18n import t
from grpo_lab.dashboard.views.groups.turns import BadCell, read_turns
from grpo_lab.objective.functions import group_advantages, grpo_loss
from grpo_lab.objective.options import LossSettings

PROMPT = "123+456="
# (reward, [(token, source, pi_old, pi_theta)]): o1 uses the tool, o2 does not. The tool token's
# probabilities are what the policy would give that text; it never sampled it.
ROLLOUTS = (
    (1.0, (("calc ", "model", 0.30, 0.36), ("123+456", "model", 0.50, 0.55), ("=", "model", 0.80, 0.82),
           ("579", "tool", 0.01, 0.02), (" 579", "model", 0.60, 0.66), ("</s>", "model", 0.90, 0.90))),
    (0.0, (("578", "model", 0.05, 0.04), ("</s>", "model", 0.85, 0.84))),
)
TOOL_TEXTS = ("579", "five hundred seventy-nine")  # what the tool may say: the loss must not care


@dataclass(frozen=True)
class Worked:
    tokens: pd.DataFrame  # per token: response, token, source, in_loss, A, ratio, term
    loss: float  # the trainer's loss with the tool tokens masked
    loss_other_tool_text: float  # the same rollouts, the tool saying something else: equal
    loss_unmasked: float  # the tool tokens counted as if the policy wrote them: differs


def _tensors(rollouts, tool_prob: float | None = None):
    T = max(len(tokens) for _, tokens in rollouts)
    old, new = torch.ones(len(rollouts), T, dtype=torch.float64), torch.ones(len(rollouts), T, dtype=torch.float64)
    mask, tool = torch.zeros(len(rollouts), T, dtype=torch.float64), torch.zeros(len(rollouts), T, dtype=torch.float64)
    for i, (_, tokens) in enumerate(rollouts):
        for k, (_, source, p_old, p_new) in enumerate(tokens):
            if source == "tool" and tool_prob is not None:  # other text: other probabilities under the policy
                p_old, p_new = tool_prob, tool_prob * 3
            old[i, k], new[i, k], mask[i, k], tool[i, k] = p_old, p_new, 1.0, float(source == "tool")
    return old.log(), new.log(), mask, tool


def compute(beta: float = 0.0, eps: float = 0.2) -> Worked:
    """The worked group's loss three ways, with the trainer's functions."""
    rewards = torch.tensor([[r for r, _ in ROLLOUTS]], dtype=torch.float64)
    A = group_advantages(rewards).advantages[0].double()  # one advantage per rollout, shared by its turns
    settings = LossSettings(epsilon=eps, beta=beta)
    logp_old, logp, mask, tool = _tensors(ROLLOUTS)
    policy_mask = mask * (1 - tool)  # batch.loss_mask: the tool's tokens are context
    out = grpo_loss(logp, logp_old, logp_old, A, policy_mask, settings)
    o_old, o_new, _, _ = _tensors(ROLLOUTS, tool_prob=0.001)
    other = grpo_loss(o_new, o_old, o_old, A, policy_mask, settings)
    unmasked = grpo_loss(logp, logp_old, logp_old, A, mask, settings)
    rows = []
    for i, (_, tokens) in enumerate(ROLLOUTS):
        for k, (tok, source, _, _) in enumerate(tokens):
            counted = bool(policy_mask[i, k])
            rows.append({"response": f"o{i + 1}", "token": tok, "source": source, "in_loss": counted,
                         "A": float(A[i]) if counted else math.nan, "ratio": float(out.ratio[i, k]),
                         "term": surrogate(float(out.ratio[i, k]), float(A[i]), eps) if counted else math.nan})
    return Worked(pd.DataFrame(rows), float(out.loss), float(other.loss), float(unmasked.loss))


def surrogate(ratio: float, advantage: float, eps: float) -> float:
    """min(r A, clip(r, 1-eps, 1+eps) A): one token's term (objective.functions.clipped_surrogate).

    >>> surrogate(1.5, 1.0, 0.2), surrogate(0.5, -1.0, 0.2)
    (1.2, -0.8)
    """
    return min(ratio * advantage, min(max(ratio, 1 - eps), 1 + eps) * advantage)


def turn_credit(members: pd.DataFrame) -> pd.DataFrame:
    """One row per turn of each rollout of a group (highest advantage first): who wrote it, its
    text, the call and result, and the advantage its tokens carry (NaN for a tool's: context).

    >>> rows = pd.DataFrame({"sample_idx": [0], "advantage": [0.5], "reward": [1.0], "turns": [json.dumps(
    ...     [{"model": "calc 1+2=", "tool": "calculator", "arguments": {"": "1+2"}, "result": "3"}, {"model": " 3"}])]})
    >>> turn_credit(rows)[["turn", "source", "text", "A"]].values.tolist()
    [[1, 'model', 'calc 1+2=', 0.5], [1, 'tool', 'calculator(1+2) → 3', nan], [2, 'model', ' 3', 0.5]]
    """
    out = []
    for _, r in members.sort_values(["advantage", "sample_idx"], ascending=[False, True]).iterrows():
        try:
            turns = read_turns(r["turns"])
        except BadCell:  # not JSON or too deep: the caller's problem line (unreadable), the others shown
            out.append({"sample_idx": r["sample_idx"], "reward": r.get("reward"), "turn": 0, "source": "unreadable",
                        "text": "", "A": None})
            continue
        if turns is None or pd.isna(r["sample_idx"]):  # a foreign table's row without an index: nothing to point at
            continue
        A = None if pd.isna(r["advantage"]) else float(r["advantage"])
        for k, turn in enumerate(turns if isinstance(turns, list) else [], start=1):
            if not isinstance(turn, dict):
                continue
            base = {"sample_idx": int(r["sample_idx"]), "reward": r.get("reward"), "turn": k}
            out.append({**base, "source": "model", "text": str(turn.get("model", "")), "A": A})
            if "tool" in turn:
                args = turn.get("arguments") or {}
                args = args if isinstance(args, dict) else {"": args}  # a table written elsewhere
                shown = args[""] if set(args) == {""} else ", ".join(f"{a}={json.dumps(v)}" for a, v in args.items())
                result = f"error: {turn['error']}" if turn.get("error") else str(turn.get("result", ""))
                out.append({**base, "source": "tool", "text": f"{turn['tool']}({shown}) → {result}", "A": None})
    return pd.DataFrame(out, columns=["sample_idx", "reward", "turn", "source", "text", "A"])


# --- the page section ------------------------------------------------------------------------------


def show() -> None:
    """The section: three points, the worked group, and a tools run's group when one is picked."""
    st.header(t("obj.tools.title"))
    st.markdown(t("obj.tools.intro"))
    sources = {"demo": t("common.source_demo"), "run": t("common.source_run")}
    source = st.radio(t("common.source"), list(sources), format_func=sources.__getitem__, horizontal=True,
                      key="tools_source")
    if source == "demo":
        _show_worked()
    else:
        _show_run()


def _show_worked() -> None:
    ex = compute()
    st.markdown(t("obj.tools.worked", prompt=PROMPT))
    headed = ex.tokens.rename(columns={c: t(f"obj.tools.col.{c}") for c in ex.tokens.columns})
    headed[t("obj.tools.col.source")] = [t(f"obj.tools.source.{s}") for s in ex.tokens["source"]]
    headed[t("obj.tools.col.in_loss")] = [t("common.yes" if v else "common.no") for v in ex.tokens["in_loss"]]
    st.dataframe(headed, hide_index=True, column_config={
        t(f"obj.tools.col.{c}"): st.column_config.NumberColumn(format="%.3f") for c in ("A", "ratio", "term")})
    same = abs(ex.loss - ex.loss_other_tool_text) < 1e-12
    (st.success if same else st.error)(t("obj.tools.result", loss=ex.loss, other=ex.loss_other_tool_text,
                                         unmasked=ex.loss_unmasked, text=TOOL_TEXTS[1]))
    st.markdown(t("obj.tools.credit"))


def _show_run() -> None:
    run = run_picker.pick_run("tools")
    picked = run_picker.pick_group(run, "tools", "tools_group") if run else None
    if not picked:
        return
    _, _, _, members = picked
    if "turns" not in members or members["turns"].isna().all():
        st.info(t("obj.tools.no_turns"))
        return
    credit = turn_credit(members)
    unreadable = credit["source"] == "unreadable"
    if unreadable.any():  # one line, and the rollouts that could be read
        st.warning(t("turns_cell.unreadable", samples=", ".join(str(s) for s in credit.loc[unreadable, "sample_idx"])))
        credit = credit[~unreadable]
    st.markdown(t("obj.tools.run_intro", calls=int(pd.to_numeric(members.get("tool_calls"), errors="coerce").fillna(0).sum()),
                  n=len(members)))
    headed = credit.rename(columns={c: t(f"obj.tools.col.{c}") for c in credit.columns})
    headed[t("obj.tools.col.source")] = [t(f"obj.tools.source.{s}") for s in credit["source"]]
    st.dataframe(headed, hide_index=True, column_config={
        t("obj.tools.col.A"): st.column_config.NumberColumn(format="%+.3f"),
        t("obj.tools.col.reward"): st.column_config.NumberColumn(format="%.3f")})
    st.caption(t("obj.tools.run_caption"))
