"""Text from a run is never markup, and the Groups page's table: run text
in Markdown is shown as written (no image, no link, no code span broken by a backtick), long
completions are cut with the rest one click away and A_i / reward first, what the rewards logged
(`extra/<name>`, `answer`) stands beside the rewards, and token colours use each side's clip bound."""

import html
import importlib
import json
import re

import pandas as pd
import pytest
from markdown_it import MarkdownIt

from app_helpers import html_bodies, open_page, texts
from grpo_lab.dashboard import markup
from grpo_lab.dashboard.views import long_text
from grpo_lab.rundir.layout import write_json_atomic

cli = importlib.import_module("grpo_lab.rundir.import")
HOSTILE = [
    "![tracker](http://t.example/pixel.png)",
    "[click](javascript:alert(1)) and <img src=http://t.example/x.png> and <script>x()</script>",
    "see http://t.example/a and www.t.example and me@t.example",
    "# heading\n- list\n> quote | a | b |",
    "*bold* _it_ ~~gone~~ `code` $x^2$ :red[colour] \\[escaped\\] &lt;",
    "kl/mean 1.8e+14 nats per token; grad_norm: 240 (step 3)",
]
# CommonMark with raw HTML on, plus GFM tables and strikethrough: stricter than Streamlit needs
PARSER = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def rendered_text(source: str) -> str:
    out = PARSER.renderInline(source)
    assert "<img" not in out and "<a " not in out and "<script" not in out, out
    assert "<em>" not in out and "<strong>" not in out and "<s>" not in out and "<code>" not in out, out
    return html.unescape(re.sub(r"<[^>]+>", "", out))


# what remark-gfm links in a text node once the escapes are resolved (mdast-util-gfm-autolink-literal)
GFM_AUTOLINK = re.compile(r"(https?://|www(?=\.))[-.\w]+|[-.\w+]+@[-\w]+(?:\.[-\w]+)+", re.I)


@pytest.mark.parametrize("text", HOSTILE)
def test_md_shows_run_text_as_written_and_nothing_else(text):
    shown = rendered_text(markup.md(text))
    assert not GFM_AUTOLINK.search(shown)  # no bare URL or address for Streamlit to link
    assert shown.replace(markup.ZWSP, "") == " ".join(text.splitlines())  # reads as written
    block = PARSER.render(markup.md(text))  # as a whole block too: no heading, list, quote or table
    assert block.startswith("<p>") and block.count("<p>") == 1, block


@pytest.mark.parametrize("text", ["a`b", "``x", "x``", "```", "p-1` ![i](http://t.example/i.png) `"])
def test_code_holds_any_backtick_in_one_code_span(text):
    out = PARSER.renderInline("prompt " + markup.code(text) + " · tail")
    assert out.count("<code>") == 1 and "<img" not in out
    inside = html.unescape(re.search(r"<code>(.*)</code>", out).group(1))
    assert inside == text and out.endswith("</code> · tail")


def group_frame(completion_len: int = 3000) -> pd.DataFrame:
    return pd.DataFrame({
        "sample_idx": [0, 1], "completion": ["x" * completion_len, "![i](http://t.example/i.png)"],
        "reward": [1.0, 0.0], "advantage": [0.7, -0.7], "rewards/correct": [1.0, 0.0],
        "extra/acc": [1.0, 0.0], "extra/pred": ["4", "<b>5</b>"], "answer": ["4", "4"], "extra/empty": [None, None],
    })


def test_long_completions_are_cut_with_the_rest_one_click_away_and_scores_come_first():
    out = markup.responses_table(group_frame(), ["rewards/correct"])
    head = re.findall(r"<th style[^>]*>(.*?)</th>", out)
    assert head == ["i", "A_i", "reward", "correct", "acc", "pred", "answer", "completion"]  # no column of nulls
    summary = re.search(r"<summary>(.*?)</summary>", out).group(1)
    assert summary.startswith("x" * markup.CUT_CHARS + "…") and "x" * (markup.CUT_CHARS + 1) not in summary
    assert "(3,000 characters: click for all of it)" in summary
    assert re.search(r"</summary>x{3000}</details>", out)  # the whole completion, behind the click
    assert "overflow-wrap:anywhere" in out  # no space in 3,000 characters still cannot widen the table
    assert "<b>5</b>" not in out and "&lt;b&gt;5&lt;/b&gt;" in out and "<img" not in out
    short = markup.responses_table(group_frame(completion_len=markup.CUT_CHARS), ["rewards/correct"])
    assert "<details" not in short.split("acc")[0] and short.count("<details") == 0


def test_a_text_too_long_to_draw_whole_is_cut_with_its_length_and_offered_whole():
    """A 1 MB completion made a 1 MB table (it took 15 s to draw): past WHOLE_CHARS only the cut is drawn,
    with its length and where the whole is; long_text lists each such text of the group."""
    group = group_frame(completion_len=1_000_000).assign(prompt="q", **{"extra/pred": ["4", "y" * 5000]})
    out = markup.responses_table(group, ["rewards/correct"])
    assert len(out) < 5_000 and "<details" not in out
    assert "x" * markup.CUT_CHARS + "… " in out and "(1,000,000 characters; show all: “Whole texts” below)" in out
    texts = long_text.group_texts(group, "run-step1-group0")
    assert [(x.label, x.file_name, len(x.text)) for x in texts] == [
        ("i=0 · completion", "run-step1-group0-i0-completion.txt", 1_000_000),
        ("i=1 · pred", "run-step1-group0-i1-extra_pred.txt", 5000)]
    assert long_text.group_texts(group_frame().assign(prompt="q"), "s") == []  # 3,000: drawn whole on a click


def test_token_colours_measure_each_side_against_its_own_clip_bound():
    """Clip-higher (1 - 0.2, 1 + 0.28): a ratio of 0.8 is at the lower bound, full colour; before,
    ratios below 1 were scaled by the upper epsilon and 0.8 showed as 0.2 / 0.28 of it."""
    def alpha(ratio: float) -> float:
        colour = markup._token_colour(pd.Series({"ratio": ratio}), "ratio", (0.8, 1.28), 0.0, 0.0)
        return float(re.search(r",([0-9.]+)\)$", colour).group(1))
    assert alpha(0.8) == alpha(1.28) == 0.7  # each bound: full colour
    assert alpha(0.9) == 0.4 and alpha(1.14) == 0.4  # half way to each bound: the same shade
    assert alpha(1.0) == 0.1


# --- the pages, under AppTest, on an imported run whose text is hostile ------------------------------


@pytest.fixture(scope="module")
def hostile_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    prompt = "p`1 ![t](http://t.example/p.png)"  # short, one line: it is its own prompt id
    rows = [{"input": prompt, "output": o, "score": s, "gts": "2", "acc": s, "pred": o, "uid": "u"}
            for o, s in (("1", 0.0), ("2" * 1000, 1.0))]
    dump = root / "dump"
    dump.mkdir()
    (dump / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    runs = root / "runs"
    assert cli.main([str(dump), "--name", "hostile", "--runs-dir", str(runs)]) == 0
    status = json.loads((runs / "hostile" / "status.json").read_text())
    write_json_atomic(runs / "hostile" / "status.json",
                      {**status, "error": "boom ![e](http://t.example/e.png) [l](http://t.example)"})
    return runs


def markdown_sources(at) -> str:
    kinds = ("markdown", "caption", "error", "warning", "info", "success", "subheader", "header", "title")
    return " ".join(str(e.value) for kind in kinds for e in at.get(kind))


def test_groups_page_shows_hostile_text_as_text_and_the_logged_extras(hostile_runs, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(hostile_runs))
    at = open_page("groups", "hostile")
    shown = markdown_sources(at)
    assert "``p`1 ![t](http://t.example/p.png)``" in shown  # the prompt id: one code span, backtick inside
    bodies = html_bodies(at)
    assert "<img" not in bodies and "![t](http://t.example/p.png)" in bodies  # the prompt, as text (st.html)
    assert "![t]" not in shown.replace("``p`1 ![t](http://t.example/p.png)``", "")  # nowhere else as Markdown
    table = re.search(r'<table class="grpo-responses".*?</table>', bodies).group(0)
    head = re.findall(r"<th style[^>]*>(.*?)</th>", table)
    assert head[:3] == ["i", "A_i", "reward"] and {"acc", "pred", "gts", "answer"} <= set(head)
    assert "2" * 1000 not in table.split("<summary>")[1].split("</summary>")[0]  # cut in the table


def test_runs_page_shows_a_hostile_error_as_text(hostile_runs, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_RUNS_DIR", str(hostile_runs))
    at = open_page("runs", "hostile")
    error = texts(at.error)
    assert f"boom \\!\\[e\\](http{markup.ZWSP}://t.example/e.png) \\[l\\](http{markup.ZWSP}://t.example)" in error, error
    assert "<img" not in PARSER.render(error) and "<a " not in PARSER.render(error)
