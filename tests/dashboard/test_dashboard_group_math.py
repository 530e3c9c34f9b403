"""The Groups page's worked computation: the chapter's numbers, with the trainer's own function."""

import math

import numpy as np
import pytest

from grpo_lab.dashboard import markup
from grpo_lab.dashboard.views.groups import group_math


def test_the_chapter_example_worked_row_by_row():
    # rewards 1, 3, 2, 6: mean 3, population std sqrt(3.5) = 1.8708
    logged = [-1.0690, 0.0, -0.5345, 1.6036]
    worked = group_math.compute([1.0, 3.0, 2.0, 6.0], logged, "group")
    t = worked.table
    assert worked.mean == pytest.approx(3.0) and worked.std == pytest.approx(math.sqrt(3.5))
    assert t["r_i - mean"].tolist() == pytest.approx([-2.0, 0.0, -1.0, 3.0])
    assert t["A_i (recomputed)"].tolist() == pytest.approx(logged, abs=1e-4)
    assert t["effect"].tolist() == ["pushed down: less likely", "no change: at the mean",
                                    "pushed down: less likely", "pushed up: more likely"]
    assert worked.max_diff < 1e-4


def test_a_mismatch_with_the_logged_advantages_is_caught():
    worked = group_math.compute([0.0, 1.0], [-1.0, 0.5], "group")
    assert not worked.matches and worked.max_diff == pytest.approx(0.5)


@pytest.mark.parametrize("mode, std", [("group", 1.0), ("sample", math.sqrt(2.0)), ("none", 1.0)])
def test_std_modes_follow_the_config(mode, std):
    worked = group_math.compute([0.0, 2.0], [0.0, 0.0], mode)
    assert worked.std == pytest.approx(std)
    assert worked.table["A_i (recomputed)"].tolist() == pytest.approx([-1.0 / std, 1.0 / std])


def test_zero_std_and_unscored_responses_get_no_push():
    flat = group_math.compute([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])
    assert flat.zero_std and flat.matches and set(flat.table["effect"]) == {"no change: no spread in the group"}
    partly = group_math.compute([None, 0.0, 1.0], [0.0, -1.0, 1.0])
    assert partly.matches and partly.table["effect"][0] == "no change: not scored"


def test_responses_table_colours_by_sign_and_escapes_text():
    import pandas as pd

    group = pd.DataFrame({"sample_idx": [0, 1, 2], "completion": ["<b>7</b>", "", "8"], "reward": [1.0, 0.0, 0.5],
                          "advantage": [1.2, -1.2, 0.0], "rewards/correctness": [1.0, 0.0, 0.5],
                          "length": [2, 1, 2], "truncated": [False, True, False]})
    out = markup.responses_table(group, ["rewards/correctness"])
    assert out.index('data-adv="pos"') < out.index('data-adv="zero"') < out.index('data-adv="neg"')
    assert "<b>7</b>" not in out and "&lt;b&gt;7&lt;/b&gt;" in out and "∅" in out and "✂" in out


def test_real_text_without_whitespace_markers_and_chat_prompts_as_turns():
    assert markup.show_text("a b\nc") == "a␣b⏎c"  # the demo tokenizer's view
    assert markup.show_text("a <b>\nc", markers=False) == '<span style="white-space:pre-wrap">a &lt;b&gt;\nc</span>'
    chatml = ("<|im_start|>system\nYou are a tutor.<|im_end|>\n<|im_start|>user\nTom has 3 apples.<|im_end|>\n"
              "<|im_start|>assistant\n")
    assert markup.chat_turns(chatml) == [("system", "You are a tutor."), ("user", "Tom has 3 apples.")]
    llama3 = ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert markup.chat_turns(llama3) == [("user", "Hi")]
    assert markup.chat_turns("3+4=") == []


def test_a_trainer_that_divides_by_std_plus_epsilon_is_recomputed_exactly():
    rewards = [1.0, 0.0, 0.0, 2.0]
    std = float(np.std(rewards, ddof=1))
    trl = [(r - 0.75) / (std + 1e-4) for r in rewards]  # TRL: sample std, plus 1e-4
    assert not group_math.compute(rewards, trl, "sample").matches  # off by ~1e-4 without the epsilon
    assert group_math.compute(rewards, trl, "sample", epsilon=1e-4).matches


@pytest.mark.parametrize("mode", __import__("grpo_lab.objective.functions", fromlist=["STD_MODES"]).STD_MODES)
def test_every_std_mode_the_trainer_has_is_checked_against_the_trainers_own_advantages(mode):
    import torch

    from grpo_lab.dashboard.i18n import t
    from grpo_lab.objective.functions import group_advantages

    step = [[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 1.0], [0.0, 2.0, 1.0, 3.0]]
    trained = group_advantages(torch.tensor(step), mode).advantages  # what the trainer logged
    for i, rewards in enumerate(step):
        worked = group_math.compute(rewards, trained[i].tolist(), mode,
                                    step_groups=[g for j, g in enumerate(step) if j != i])
        assert worked.matches, (mode, i, worked.max_diff)
    assert group_math.std_formula(mode) and t("math.std." + mode) != "math.std." + mode


def test_batch_mode_needs_the_steps_other_groups():
    # alone, group 0's own std (0.43) divides; the step's std (0.48) is what the trainer used
    logged = [1.55, -0.52, -0.52, -0.52]
    assert not group_math.compute([1.0, 0.0, 0.0, 0.0], logged, "batch").matches
    worked = group_math.compute([1.0, 0.0, 0.0, 0.0], logged, "batch", step_groups=[[1.0, 1.0, 1.0, 1.0]])
    assert worked.max_diff < 0.01 and worked.std == pytest.approx(0.484, abs=1e-3)
