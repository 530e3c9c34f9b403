"""Small HTML views for st.html: a group's responses coloured by advantage, tokens coloured by a
per-token figure. Every piece of run text is escaped; colours are inline styles.

Text a run wrote (prompts, prompt ids, completions, errors, events, reward names) is never markup:
in HTML it goes through `html.escape` (show_text), in Markdown (st.markdown, st.caption, st.error,
widget labels) through `md` or `code`, so it cannot load an image, make a link or end its code span."""

from __future__ import annotations

import html
import math
import re

import numpy as np
import pandas as pd

from grpo_lab.dashboard.i18n import t
from grpo_lab.rundir.chat import chat_turns  # noqa: F401 - the views' name for it (groups, compare)

POS, NEG, ZERO = "rgba(26,152,80,0.28)", "rgba(215,48,39,0.28)", "rgba(158,158,158,0.22)"
BACKGROUND = {"pos": POS, "neg": NEG, "zero": ZERO}  # by the sign of the advantage


def adv_class(a: float) -> str:
    return "pos" if a > 0 else "neg" if a < 0 else "zero"


def response_chip(sample_idx: int, advantage: float, style: str = "") -> str:
    """`i=3 A=+1.20` on its advantage's colour: the label a response's line starts with."""
    return (f'<span style="{style}font-family:monospace;background:{BACKGROUND[adv_class(advantage)]};'
            f'padding:2px 6px;border-radius:4px">i={int(sample_idx)} A={float(advantage):+.2f}</span>')


CUT_CHARS = 300  # a completion longer than this is cut in tables; the rest is one click away (<details>)
WHOLE_CHARS = 4_000  # a longer text is never drawn whole (1 MB took 15 s): its view offers it (long_text.py)
# What can turn text into markup: links and images ([ ]), HTML (< > &), code spans, emphasis (* and
# _ at a word's edge), LaTeX ($), tables, headings, strikethrough: each is backslash-escaped.
# Other punctuation (/ . - : and _ inside a word) stays as it is, so a path or metric name reads the same.
_MD_SPECIAL = re.compile(r"[\\`*\[\]<>&$~|#!@{}]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# Bare URLs and e-mail addresses: Streamlit's Markdown (remark-gfm) links them after escapes are
# resolved, so a backslash cannot stop it; an invisible zero-width space inside the pattern does.
_AUTOLINK = re.compile(r"(?i)(?<=https)(?=:)|(?<=http)(?=:)|(?<=ftp)(?=:)|(?<=www)(?=\.)|(?<=@)")
ZWSP = "\u200b"


def md(text) -> str:
    """Run text for a Markdown element (st.markdown, st.caption, st.error, ...), shown as it is:
    no image, link, emphasis, HTML, LaTeX or Streamlit `:colour[...]`; lines joined (no heading or
    list can start).

    >>> print(md("![x](http://t.example/a.png) *b* a_b").replace(ZWSP, "|"))
    \\!\\[x\\](http|://t.example/a.png) \\*b\\* a_b
    """
    escaped = _MD_SPECIAL.sub(lambda m: "\\" + m.group(0), " ".join(str(text).splitlines()))
    return _AUTOLINK.sub(ZWSP, escaped)


def code(text) -> str:
    """Run text as one Markdown code span that no backtick in it can end: the fence is one backtick
    longer than the longest run inside (CommonMark), spaces pad a leading or trailing backtick.

    >>> code("a`b"), code("``x")
    ('``a`b``', '``` ``x ```')
    """
    text = " ".join(str(text).splitlines())
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def cut_plain(text, limit: int = CUT_CHARS) -> str:
    """Plain text cut to `limit` characters and "…" (a table cell; the whole text is one click away).

    >>> cut_plain("abcdef", 3), cut_plain("abc", 3)
    ('abc…', 'abc')
    """
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[:limit] + "…"


def cut_text(text, markers: bool = True, limit: int = CUT_CHARS) -> str:
    """show_text, cut to `limit` characters with the whole text one click away (an HTML <details>);
    a text of more than WHOLE_CHARS is only cut, its length and where to see all of it beside the
    cut: the view lists it whole on request (views/long_text.py), so no page holds it all.

    >>> cut_text("x" * 5_000, limit=3)
    'xxx… <i class="grpo-long">(5,000 characters; show all: “Whole texts” below)</i>'
    """
    text = "" if text is None else str(text)
    if len(text) <= limit:
        return show_text(text, markers)
    if len(text) > WHOLE_CHARS:
        long = t("markup.long", n=f"{len(text):,}", heading=t("long_text.heading"))
        return f'{show_text(text[:limit], markers)}… <i class="grpo-long">{html.escape(long)}</i>'
    more = t("markup.more", n=f"{len(text):,}")
    return (f'<details class="grpo-cut"><summary>{show_text(text[:limit], markers)}… <i>{html.escape(more)}</i>'
            f"</summary>{show_text(text, markers)}</details>")


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


CELL = "padding:3px 8px;border-bottom:1px solid rgba(128,128,128,.25);text-align:left;"


def extra_columns(group: pd.DataFrame) -> list[str]:
    """What the rewards logged beside their scores (`extra/<name>`, TRL's log_extra, verl's extras)
    and the reference answer (`answer`), where the group has any value of them."""
    named = [c for c in group.columns if c.startswith("extra/")] + (["answer"] if "answer" in group else [])
    return [c for c in named if group[c].notna().any()]


def _cell(v, markers: bool) -> str:
    """A number as _fmt writes it; text (a logged extra, a reference) escaped and cut."""
    if isinstance(v, str):
        return cut_text(v, markers, limit=80)
    return _fmt(v)


WRAP = "overflow-wrap:anywhere;word-break:break-word;min-width:12em;"


def responses_table(group: pd.DataFrame, reward_columns: list[str], compact: bool = False,
                    markers: bool = True) -> str:
    """The G responses sorted by advantage (highest first), each row tinted by the sign of A_i.

    A_i and the rewards come first so a long completion never pushes them off-screen; the
    completion is cut at CUT_CHARS with the rest one click away, and breaks anywhere (a completion
    with no spaces cannot widen the table)."""
    rows = group.sort_values(["advantage", "sample_idx"], ascending=[False, True])
    extra = [] if compact else ["length", "truncated", "ratio_mean", "clip_frac", "kl_mean", "tool_calls", "tool_errors"]
    extra = [c for c in extra if c in rows]
    logged = extra_columns(rows)
    words = {"completion": t("col.completion"), "reward": t("col.reward"), "length": t("col.length"),
             "truncated": t("col.truncated"), "answer": t("col.answer"), "tool_calls": t("col.tool_calls"),
             "tool_errors": t("col.tool_errors"),  # tool columns: runs with tools only
             "ratio_mean": t("layout_col.ratio_mean"), "clip_frac": t("layout_col.clip_frac"), "kl_mean": t("layout_col.kl_mean")}
    head = [words.get(c, c) for c in ("i", "A_i", "reward", *[c.split("/", 1)[1] for c in reward_columns],
                                      *[c if c == "answer" else c.split("/", 1)[1] for c in logged],
                                      "completion", *extra)]
    # headers break only between words (keep-all: a Chinese one no longer breaks after every character),
    # a logged extra (an answer) is narrower than the completion, and a table still wider than the page
    # scrolls sideways in its own box instead of cutting its last columns (a tool run's "tool errors")
    out = ['<div class="grpo-table-box" style="overflow-x:auto;max-width:100%">'
           '<table class="grpo-responses" style="border-collapse:collapse;width:100%;font-size:0.9rem">',
           "<thead><tr>" + "".join(f'<th style="{CELL}word-break:keep-all">{html.escape(h)}</th>' for h in head)
           + "</tr></thead><tbody>"]
    for _, r in rows.iterrows():
        kind = adv_class(float(r["advantage"]))
        colour = BACKGROUND[kind]
        cells = [(_fmt(r["sample_idx"]), ""), (f'<b>{float(r["advantage"]):+.3f}</b>', ""), (_fmt(r.get("reward")), ""),
                 *[(_fmt(r.get(c)), "") for c in reward_columns],
                 *[(_cell(r.get(c), markers), WRAP.replace("12em", "6em")) for c in logged],
                 (f'<code>{cut_text(r["completion"], markers)}</code>', WRAP),
                 *[(("✂ " + t("common.yes") if r[c] else "") if c == "truncated" else _fmt(r[c]), "") for c in extra]]
        out.append(f'<tr class="adv-{kind}" data-adv="{kind}" style="background:{colour}">'
                   + "".join(f'<td style="{CELL}{style}">{c}</td>' for c, style in cells) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _token_colour(row: pd.Series, mode: str, bounds: tuple[float, float], kl_max: float, adv_max: float) -> str:
    if mode == "ratio":
        # a ratio below 1 is measured against the lower bound (1 - epsilon), above 1 against the
        # upper one (1 + epsilon_high): with clip-higher the two sides are not the same distance
        r, (low, high) = float(row["ratio"]), bounds
        span = (high - 1.0) if r >= 1 else (1.0 - low)
        t = min(abs(r - 1.0) / max(span, 1e-6), 1.0)
        return f"rgba(255,140,0,{0.1 + 0.6 * t:.2f})" if r >= 1 else f"rgba(30,120,230,{0.1 + 0.6 * t:.2f})"
    if mode == "clipped":
        return "rgba(215,48,39,0.55)" if bool(row.get("clipped", False)) else ZERO
    if mode == "kl":
        k = float(row["kl"]) if not math.isnan(float(row["kl"])) else 0.0
        return f"rgba(128,0,160,{0.08 + 0.7 * min(k / kl_max, 1.0):.2f})" if kl_max > 0 else ZERO
    a = float(row.get("advantage", 0.0))
    t = min(abs(a) / adv_max, 1.0) if adv_max > 0 else 0.0
    return f"rgba(26,152,80,{0.1 + 0.6 * t:.2f})" if a > 0 else f"rgba(215,48,39,{0.1 + 0.6 * t:.2f})" if a < 0 else ZERO


TOOL_STYLE = "background:transparent;border:1px dashed rgba(128,128,128,.6);font-style:italic;opacity:.75"


def is_tool(tokens: pd.DataFrame) -> np.ndarray:
    """True for the rows a tool wrote (tokens `source` = tool, runs with tools): context the policy
    read, not tokens it chose, so no ratio, KL or advantage of theirs means anything (no loss)."""
    if "source" not in tokens:
        return np.zeros(len(tokens), dtype=bool)
    return (tokens["source"].astype(str) == "tool").to_numpy()


def tokens_html(tokens: pd.DataFrame, mode: str, bounds: tuple[float, float] = (0.8, 1.2)) -> str:
    """One completion's tokens as coloured chips; hover shows every per-token figure. bounds: the
    clip range (1 - epsilon, 1 + epsilon_high) as the run logged it: a ratio at a bound is full colour.
    A tool's output is shown as context: uncoloured, dashed, its hover saying so, and left out of
    the scale the model's tokens are coloured on."""
    if tokens.empty:
        return ""
    tokens = tokens.assign(_tool=is_tool(tokens))
    model = tokens[~tokens["_tool"]]
    kl = model["kl"].to_numpy(dtype=float) if "kl" in model else np.zeros(len(model))
    kl_max = float(np.nanmax(np.abs(kl))) if np.isfinite(kl).any() else 0.0
    adv = model["advantage"].to_numpy(dtype=float) if "advantage" in model else np.zeros(len(model))
    adv_max = float(np.nanmax(np.abs(adv))) if np.isfinite(adv).any() else 0.0
    chips = []
    for _, row in tokens.sort_values("position").iterrows():
        if row["_tool"]:
            tip = t("tool_tokens.tip", position=row["position"])
            chips.append(f'<span class="tok tok-tool" title="{html.escape(tip)}" style="display:inline-block;'
                         f'margin:2px;padding:2px 6px;border-radius:4px;font-family:monospace;{TOOL_STYLE}">'
                         f"{show_text(row['token'])}</span>")
            continue
        clipped = bool(row.get("clipped", False))
        border = "2px solid #d73027" if clipped and mode == "ratio" else "1px solid rgba(128,128,128,.35)"
        tip = (t("markup.tip", position=row["position"], ratio=_fmt(row.get("ratio"), 4), kl=_fmt(row.get("kl"), 4),
                 a=_fmt(row.get("advantage"), 3), new=_fmt(row.get("logp_new")), old=_fmt(row.get("logp_old")),
                 ref=_fmt(row.get("logp_ref")))
               + (t("markup.tip_value", value=_fmt(row["value"])) if "value" in row else "")
               + (t("markup.tip_clipped") if clipped else ""))
        chips.append(f'<span class="tok{" tok-clipped" if clipped else ""}" title="{html.escape(tip)}" '
                     f'style="display:inline-block;margin:2px;padding:2px 6px;border-radius:4px;'
                     f'font-family:monospace;border:{border};'
                     f'background:{_token_colour(row, mode, bounds, kl_max, adv_max)}">'
                     f"{show_text(row['token'])}</span>")
    return '<div class="grpo-tokens" style="line-height:2">' + "".join(chips) + "</div>"


def policy_tokens(tokens: pd.DataFrame) -> pd.DataFrame:
    """The token table as shown: a tool's rows keep their text and position, their policy figures
    (ratio, KL, advantage, log-probabilities, clip flags) blank, since they trained nothing."""
    tool = is_tool(tokens)
    if not tool.any():
        return tokens
    figures = [c for c in ("logp_new", "logp_old", "logp_ref", "ratio", "kl", "advantage", "value", "return",
                           "token_reward") if c in tokens]
    out = tokens.copy()
    out[figures] = out[figures].astype("float64")
    out.loc[tool, figures] = np.nan
    for flag in ("clipped_low", "clipped_high", "clipped"):
        if flag in out:
            out[flag] = out[flag].astype("object")
            out.loc[tool, flag] = None
    return out
