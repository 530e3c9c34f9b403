"""Layout and wording: the Groups responses table fits (headers break only between words, so a
Chinese header is not one character per line; a wider table scrolls in its own box), its per-completion
columns and the advantage computation's headers are worded per language, Compare's variants table shows
a missing IQM as "—" like the mean, its step axis never reads 10 as "1e+1", and its chart titles say
what the metric means in the page's language."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from grpo_lab.dashboard import i18n


def _page(lang: str) -> None:
    import pandas as pd  # noqa: F811 - AppTest runs this body on its own
    import streamlit as st

    from grpo_lab.dashboard import ui
    from grpo_lab.dashboard import markup
    from grpo_lab.dashboard.views.compare import variants_view

    st.session_state["lang"] = lang
    group = pd.DataFrame({"sample_idx": [0, 1], "advantage": [0.5, -0.5], "reward": [1.0, 0.0],
                          "completion": ["a", "b"], "ratio_mean": [1.0, 1.0], "clip_frac": [0.0, 0.1],
                          "kl_mean": [0.01, 0.02], "tool_calls": [1, 2], "tool_errors": [0, 1]})
    st.html(markup.responses_table(group, []))
    table = pd.DataFrame({"variant": ["a", "b"], "metric": ["final reward"] * 2, "mean": [0.5, float("nan")],
                          "ci_low": [0.4, float("nan")], "ci_high": [0.6, float("nan")], "iqm": [0.5, None], "n": [3, 0]})
    st.dataframe(variants_view.stats_table(table))
    heads = ui.headings()
    st.caption(" | ".join([heads["r_i - mean"], variants_view.chart_title("reward/mean"),
                           variants_view.chart_title("rewards/my_reward/mean")]))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_groups_and_compare_texts_and_layout(lang):
    at = AppTest.from_function(_page, args=(lang,), default_timeout=60)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    words = i18n.texts(lang)
    body = " ".join(e.proto.body for e in at.get("html"))
    assert body.startswith('<div class="grpo-table-box" style="overflow-x:auto')
    heads = [h.split(">", 1)[1] for h in body.split("<th ")[1:]]
    assert all('word-break:keep-all' in h for h in body.split("<th ")[1:])
    for key in ("layout_col.ratio_mean", "layout_col.clip_frac", "layout_col.kl_mean", "col.tool_errors"):
        assert any(h.startswith(words[key] + "<") for h in heads), (key, heads)
    assert not any(h.startswith(("ratio_mean", "clip_frac", "kl_mean")) for h in heads)
    stats = at.dataframe[0].value
    assert stats[words["variants.iqm"]].tolist() == ["0.5", "—"]  # missing like the mean, never "None"
    said = at.caption[0].value.split(" | ")
    assert said[0] == words["layout_col.r_minus_mean"]
    assert said[1].endswith(" · reward/mean") and said[1] != "reward/mean"
    assert said[2] == "rewards/my_reward/mean"  # a name the registry lacks stays as it is
    if lang == "zh":
        assert "本步" in said[1]


def test_the_step_axis_is_not_formatted_with_g():
    """Vega gives a "g" axis format the tick step's precision: ticks 10 apart on 0-25 read "1e+1", "2e+1"."""
    from grpo_lab.dashboard.views.compare.variants_view import band_chart

    bands = pd.DataFrame({"x": [1, 25], "mean": [0.1, 0.2], "low": [0.0, 0.1], "high": [0.2, 0.3], "variant": ["a"] * 2,
                          "n": [2, 2]})
    spec = band_chart(bands, None, title="t", x_title="step")
    fmt = spec["encoding"]["x"]["axis"]["format"]
    assert not fmt.rstrip().endswith(("g", "s", "e", "r")) and fmt.endswith("f")
    assert math.isclose(spec["encoding"]["x"]["axis"]["tickMinStep"], 1)


def test_a_variant_keeps_its_colour_on_a_chart_where_another_has_no_line():
    """beta=0 measured no KL: on the KL chart beta=0.04 is the only line and must keep the colour it has
    on the reward chart (Vega hands colours out in the order of the data's values otherwise)."""
    from grpo_lab.dashboard.views.compare.variants_view import band_chart

    only = pd.DataFrame({"x": [1], "mean": [0.1], "low": [0.0], "high": [0.2], "variant": ["beta=0.04"], "n": [2]})
    colour = band_chart(only, None, title="t", x_title="step", domain=["beta=0", "beta=0.04"])["encoding"]["color"]
    assert colour["scale"]["domain"] == ["beta=0", "beta=0.04"]  # its place, hence its colour, is the page's
    assert colour["legend"]["values"] == ["beta=0.04"]  # and the legend names only the line drawn
