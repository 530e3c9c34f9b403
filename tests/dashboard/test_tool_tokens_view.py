"""A tool's output in the token view (markup.py): context, never coloured as the policy's tokens.

The tokens table marks each token's `source` (model or tool) in runs with tools; a tool's tokens trained
nothing, so their ratio, KL and advantage are neither drawn nor part of the scale the model's are drawn on."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from grpo_lab.dashboard import markup


def rollout() -> pd.DataFrame:
    """Two model tokens, a tool result of two tokens (with figures far larger than the model's), one model token."""
    return pd.DataFrame({
        "sample_idx": 0, "position": [0, 1, 2, 3, 4], "token": ["<calc>", "2+2", "4", "</r>", "4"],
        "source": ["model", "model", "tool", "tool", "model"],
        "ratio": [1.0, 1.1, 5.0, 0.1, 1.2], "kl": [0.1, 0.2, 9.0, 9.0, 0.2], "advantage": [0.5, 0.5, 4.0, 4.0, 0.5],
        "logp_new": [-1.0, -1.0, -0.1, -0.1, -1.0], "logp_old": -1.0, "logp_ref": -1.0,
        "clipped_low": [False, False, True, True, False], "clipped_high": False})


def chips(html: str) -> list[tuple[str, str, str]]:
    """(class, style, text) of each token chip."""
    return re.findall(r'<span class="(tok[^"]*)" title="[^"]*" style="([^"]*)">([^<]*)</span>', html)


@pytest.mark.parametrize("mode", ["ratio", "clipped", "kl", "advantage"])
def test_a_tools_tokens_are_context_in_every_colour_mode(mode):
    shown = chips(markup.tokens_html(rollout(), mode, (0.8, 1.2)))
    assert [c for c, _, _ in shown] == ["tok", "tok", "tok tok-tool", "tok tok-tool", "tok"]
    for cls, style, _ in shown:
        if "tok-tool" in cls:
            assert "background:transparent" in style and "dashed" in style and "rgba(" not in style.split("border")[0]
        else:
            assert "background:rgba(" in style


def test_the_model_tokens_scale_leaves_the_tool_out():
    # the model's largest |A| is 0.5: its tokens are full colour (alpha 0.70), not dimmed beside the tool's 4.0
    html = markup.tokens_html(rollout(), "advantage")
    assert [s.split("background:")[1] for c, s, _ in chips(html) if c == "tok"] == ["rgba(26,152,80,0.70)"] * 3
    html = markup.tokens_html(rollout(), "kl")  # the model's largest KL, 0.2, is the darkest purple
    assert "rgba(128,0,160,0.78)" in html and html.count("rgba(128,0,160,0.78)") == 2


def test_a_tools_hover_says_context_and_the_table_leaves_its_figures_blank():
    html = markup.tokens_html(rollout(), "ratio")
    tips = re.findall(r'title="([^"]*)"', html)
    assert "a tool&#x27;s output" in tips[2] and "ratio" not in tips[2].split("(")[0]
    assert tips[0].startswith("position 0 · ratio 1")
    table = markup.policy_tokens(rollout())
    tool = table["source"] == "tool"
    assert table.loc[tool, ["ratio", "kl", "advantage", "logp_new"]].isna().all(axis=None)
    assert table.loc[tool, "clipped_low"].isna().all() and table.loc[tool, "token"].tolist() == ["4", "</r>"]
    assert np.allclose(table.loc[~tool, "ratio"], [1.0, 1.1, 1.2])


def test_a_run_without_tools_is_drawn_as_before():
    plain = rollout().drop(columns="source")
    assert markup.policy_tokens(plain) is plain
    assert all("tok-tool" not in c for c, _, _ in chips(markup.tokens_html(plain, "ratio")))
