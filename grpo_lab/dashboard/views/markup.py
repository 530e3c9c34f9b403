"""Small HTML views for st.html: a group's responses coloured by advantage, tokens coloured by a
per-token figure. Every piece of run text is escaped; colours are inline styles."""

from __future__ import annotations

import html
import math
import re

import numpy as np
import pandas as pd

from grpo_lab.dashboard.i18n import t

POS, NEG, ZERO = "rgba(26,152,80,0.28)", "rgba(215,48,39,0.28)", "rgba(158,158,158,0.22)"
BACKGROUND = {"pos": POS, "neg": NEG, "zero": ZERO}  # by the sign of the advantage


def adv_class(a: float) -> str:
    return "pos" if a > 0 else "neg" if a < 0 else "zero"


def _fmt(v, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, (bool, np.bool_)):
        return t("common.yes") if v else ""
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return f"{float(v):.{digits}f}"


def show_text(text: str, markers: bool = True) -> str:
    """Escaped text with empty completions made visible; with `markers` every space and newline
    too (␣, ⏎: what the one-character demo tokenizer needs), else line breaks kept as they are."""
    if text is None or text == "":
        return f'<span style="opacity:.55">∅ {html.escape(t("markup.empty"))}</span>'
    if markers:
        return html.escape(str(text)).replace(" ", "␣").replace("\n", "⏎")
    return f'<span style="white-space:pre-wrap">{html.escape(str(text))}</span>'


# Chat templates as rendered into prompts: ChatML (SmolLM2, Qwen) and Llama 3's headers.
_TURNS = (re.compile(r"<\|im_start\|>(\w+)\n(.*?)(?:<\|im_end\|>|$)", re.S),
          re.compile(r"<\|start_header_id\|>(\w+)<\|end_header_id\|>\n*(.*?)(?:<\|eot_id\|>|$)", re.S))


def chat_turns(prompt: str) -> list[tuple[str, str]]:
    """[(role, content), ...] of a chat-formatted prompt; [] when it is plain text."""
    for pattern in _TURNS:
        turns = [(role, content.strip()) for role, content in pattern.findall(prompt or "")]
        if turns:
            return [t for t in turns if t[1] or t[0] != "assistant"]  # the open assistant turn is the completion
    return []


CELL = "padding:3px 8px;border-bottom:1px solid rgba(128,128,128,.25);text-align:left;"


def responses_table(group: pd.DataFrame, reward_columns: list[str], compact: bool = False,
                    markers: bool = True) -> str:
    """The G responses sorted by advantage (highest first), each row tinted by the sign of A_i."""
    rows = group.sort_values(["advantage", "sample_idx"], ascending=[False, True])
    extra = [] if compact else ["length", "truncated", "ratio_mean", "clip_frac", "kl_mean"]
    extra = [c for c in extra if c in rows]
    words = {"completion": t("col.completion"), "reward": t("col.reward"), "length": t("col.length"),
             "truncated": t("col.truncated")}
    head = [words.get(c, c) for c in ("i", "completion", "reward", *[c.split("/", 1)[1] for c in reward_columns],
                                      "A_i", *extra)]
    out = ['<table class="grpo-responses" style="border-collapse:collapse;width:100%;font-size:0.9rem">',
           "<thead><tr>" + "".join(f'<th style="{CELL}">{html.escape(h)}</th>' for h in head) + "</tr></thead><tbody>"]
    for _, r in rows.iterrows():
        kind = adv_class(float(r["advantage"]))
        colour = BACKGROUND[kind]
        cells = [_fmt(r["sample_idx"]), f'<code>{show_text(r["completion"], markers)}</code>', _fmt(r.get("reward")),
                 *[_fmt(r.get(c)) for c in reward_columns],
                 f'<b>{float(r["advantage"]):+.3f}</b>',
                 *[("✂ " + t("common.yes") if r[c] else "") if c == "truncated" else _fmt(r[c]) for c in extra]]
        out.append(f'<tr class="adv-{kind}" data-adv="{kind}" style="background:{colour}">'
                   + "".join(f'<td style="{CELL}">{c}</td>' for c in cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _token_colour(row: pd.Series, mode: str, eps: float, kl_max: float, adv_max: float) -> str:
    if mode == "ratio":
        r = float(row["ratio"])
        t = min(abs(r - 1.0) / max(eps, 1e-6), 1.0)
        return f"rgba(255,140,0,{0.1 + 0.6 * t:.2f})" if r >= 1 else f"rgba(30,120,230,{0.1 + 0.6 * t:.2f})"
    if mode == "clipped":
        return "rgba(215,48,39,0.55)" if bool(row.get("clipped", False)) else ZERO
    if mode == "kl":
        k = float(row["kl"]) if not math.isnan(float(row["kl"])) else 0.0
        return f"rgba(128,0,160,{0.08 + 0.7 * min(k / kl_max, 1.0):.2f})" if kl_max > 0 else ZERO
    a = float(row.get("advantage", 0.0))
    t = min(abs(a) / adv_max, 1.0) if adv_max > 0 else 0.0
    return f"rgba(26,152,80,{0.1 + 0.6 * t:.2f})" if a > 0 else f"rgba(215,48,39,{0.1 + 0.6 * t:.2f})" if a < 0 else ZERO


def tokens_html(tokens: pd.DataFrame, mode: str, eps: float = 0.2) -> str:
    """One completion's tokens as coloured chips; hover shows every per-token figure."""
    if tokens.empty:
        return ""
    kl = tokens["kl"].to_numpy(dtype=float) if "kl" in tokens else np.zeros(len(tokens))
    kl_max = float(np.nanmax(np.abs(kl))) if np.isfinite(kl).any() else 0.0
    adv = tokens["advantage"].to_numpy(dtype=float) if "advantage" in tokens else np.zeros(len(tokens))
    adv_max = float(np.nanmax(np.abs(adv))) if np.isfinite(adv).any() else 0.0
    chips = []
    for _, row in tokens.sort_values("position").iterrows():
        clipped = bool(row.get("clipped", False))
        border = "2px solid #d73027" if clipped and mode == "ratio" else "1px solid rgba(128,128,128,.35)"
        tip = (t("markup.tip", position=row["position"], ratio=_fmt(row.get("ratio"), 4), kl=_fmt(row.get("kl"), 4),
                 a=_fmt(row.get("advantage"), 3), new=_fmt(row.get("logp_new")), old=_fmt(row.get("logp_old")),
                 ref=_fmt(row.get("logp_ref")))
               + (t("markup.tip_value", value=_fmt(row["value"])) if "value" in row else "")
               + (t("markup.tip_clipped") if clipped else ""))
        chips.append(f'<span class="tok{" tok-clipped" if clipped else ""}" title="{html.escape(tip)}" '
                     f'style="display:inline-block;margin:2px;padding:2px 6px;border-radius:4px;'
                     f'font-family:monospace;border:{border};background:{_token_colour(row, mode, eps, kl_max, adv_max)}">'
                     f"{show_text(row['token'])}</span>")
    return '<div class="grpo-tokens" style="line-height:2">' + "".join(chips) + "</div>"
