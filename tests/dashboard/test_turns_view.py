"""The Groups page's turns of a tool rollout (grpo_lab/dashboard/views/groups/turns.py), as HTML."""

from __future__ import annotations

from grpo_lab.dashboard.views.groups.turns import turns_html

TURNS = [{"model": "calc 12345+67890=", "tool": "calculator", "arguments": {"": "12345+67890"},
          "result": "80235", "seconds": 0.0012, "error": None},
         {"model": "<b>x</b> ", "tool": "lookup", "arguments": {"key": "a<b"}, "result": "error: KeyError: 'a<b'",
          "seconds": 0.5, "error": "KeyError: 'a<b'"},
         {"model": " done"}]


def test_calls_and_results_are_set_apart_and_escaped():
    out = turns_html(TURNS, markers=False)
    assert out.count('class="grpo-turn-model"') == 3
    assert out.count('class="grpo-turn-tool"') == 1 and out.count('class="grpo-turn-error"') == 1
    tool = out.split('class="grpo-turn-tool"')[1].split("</div>")[0]
    assert "calculator(12345+67890) → " in tool and "80235" in tool and "0.001 s" in tool
    error = out.split('class="grpo-turn-error"')[1].split("</div>")[0]
    assert 'lookup(key=&quot;a&lt;b&quot;)' in error and "KeyError: &#x27;a&lt;b&#x27;" in error
    assert "<b>x</b>" not in out and "&lt;b&gt;x&lt;/b&gt;" in out  # the model's text is text, never markup


def test_the_model_text_order_is_kept():
    out = turns_html(TURNS, markers=True)
    assert out.index("calc␣12345+67890=") < out.index("80235") < out.index("␣done")
