"""GRPO and its variants: one group (sliders, or a group of a run) through the chapter's GRPO,
Dr. GRPO, DAPO and GSPO side by side; a long wrong answer; groups with equal rewards; the
advantage scale; three quiz questions."""

import pandas as pd
import streamlit as st

from grpo_lab.dashboard.concepts import quiz, run_picker, variants
from grpo_lab.dashboard.concepts.from_run import read_table
from grpo_lab.dashboard.i18n import lang, t
from grpo_lab.dashboard.reading import data

st.title(t("var.title"))
st.markdown(t("var.intro"))

KEYS = tuple(variants.VARIANTS)
NAMES = {k: t(f"var.name.{k}") for k in KEYS}
NAMES.update({k: t(f"var.col.{k}") for k in (
    "response", "reward", "length", "truncated", "push", "position", "max_token_ratio", "clipped", "group",
    "this", "other", "len", "per_token", "total", "per_token_title", "total_title")})
NAMES.update({f"state_{k}": t(f"var.state.{k}") for k in ("clipped", "masked", "dropped")})


def options_table() -> pd.DataFrame:
    """What each variant sets, in words: the rows of the trainer options that differ."""
    def clip_range(v: variants.Variant) -> str:
        low, high = v.loss_settings(variants.MAX_LEN).clip_range
        return f"[{low:g}, {high:g}]"

    rows = {
        t("var.opt.std_mode"): [t(f"var.val.std.{v.std_mode}") for v in variants.VARIANTS.values()],
        t("var.opt.aggregation"): [t(f"var.val.agg.{v.aggregation}") for v in variants.VARIANTS.values()],
        t("var.opt.ratio"): [t(f"var.val.level.{v.importance_level}") for v in variants.VARIANTS.values()],
        t("var.opt.clip"): [clip_range(v) for v in variants.VARIANTS.values()],
        t("var.opt.truncated"): [t(f"var.val.trunc.{'masked' if v.mask_truncated else 'kept'}")
                                 for v in variants.VARIANTS.values()],
        t("var.opt.equal"): [t(f"var.val.equal.{'dropped' if v.dynamic_sampling else 'kept'}")
                             for v in variants.VARIANTS.values()],
        t("var.opt.preset"): [f"grpo_lab/configs/{variants.PRESET_FILES[k]}" for k in KEYS],
    }
    frame = pd.DataFrame(rows, index=[NAMES[k] for k in KEYS]).T
    return frame.rename_axis(t("var.opt.option")).reset_index()


st.subheader(t("var.options_title"))
st.table(options_table().set_index(t("var.opt.option")))
st.caption(t("var.papers"))

# --- one group, four objectives -----------------------------------------------------------------
st.header(t("var.group_title"))
source = st.radio(t("common.source"), ["demo", "run"], horizontal=True, key="var_source",
                  format_func={"demo": t("common.source_demo"), "run": t("common.source_run")}.__getitem__)
group = None
if source == "demo":
    st.markdown(t("var.group_intro", max_len=variants.MAX_LEN))
    cols = st.columns(4)
    rewards = [cols[i].slider(t("var.reward_i", i=i + 1), 0.0, 1.0, variants.DEFAULT_REWARDS[i], 0.5,
                              key=f"var_r{i + 1}") for i in range(4)]
    left, right = st.columns(2)
    long_len = left.slider(t("var.long_len", max_len=variants.MAX_LEN), 1, variants.MAX_LEN,
                           variants.DEFAULT_LONG_LEN, key="var_long_len")
    drift = right.slider(t("var.drift"), 0.0, 0.3, variants.DEFAULT_DRIFT, 0.01, key="var_drift")
    group = variants.demo_group(rewards, long_len, drift)
    if bool(group.truncated[3]):
        st.caption(t("var.truncated_note", max_len=variants.MAX_LEN))
else:
    run = run_picker.pick_run("var", algos=("grpo",))
    picked = run_picker.pick_group(run, "var", "var_group") if run else None
    if picked:
        step, groups, label, members = picked
        trained = [g for lab, g in groups if lab != label and not g.get("dropped", pd.Series([False])).any()]
        others = [[float(r) for r in g["reward"].fillna(float("nan"))] for g in trained]  # batch std's step
        tokens = read_table(run.path, "tokens", step=step).frame
        mine = tokens[tokens["group"] == members["group"].iloc[0]] if "group" in tokens else None
        group = variants.run_group(members, data.settings(run).max_new_tokens or 1, mine, others)
        st.markdown(t("var.run_intro", step=step, max_len=group.max_len))
        if mine is None or not len(mine):
            st.caption(t("var.run_no_tokens"))
        if "dropped" in members and members["dropped"].any():
            st.caption(t("var.run_dropped"))

if group is not None:
    results = variants.outcomes(group)
    summary = variants.summary(group, results, NAMES)
    st.dataframe(summary, hide_index=True, column_config={
        c: st.column_config.NumberColumn(format="%.4f") for c in summary.columns
        if c.endswith(" · A") or c.endswith(NAMES["push"])})
    for key, res in results.items():
        line = t("var.dropped_line", name=NAMES[key]) if res.dropped else t(
            "var.outcome_line", name=NAMES[key], loss=res.loss, clipped=int(res.clipped.sum()),
            tokens=int(group.mask.sum()), masked=variants.masked_share(group, res))
        st.markdown(line)
    st.altair_chart(variants.push_chart(group, results, NAMES), key="var_push_chart")
    st.caption(t("var.push_note"))
    if any(res.zero_std for res in results.values()):
        st.warning(t("var.equal_now"))

    st.subheader(t("var.clip_title"))
    st.markdown(t("var.clip_intro"))
    st.dataframe(variants.clip_table(group, results, NAMES), hide_index=True,
                 column_config={c: st.column_config.NumberColumn(format="%.4f")
                                for c in ("s_i", NAMES["max_token_ratio"])})

# --- a long wrong answer ----------------------------------------------------------------------------
st.header(t("var.long_title"))
st.markdown(t("var.long_intro", max_len=variants.MAX_LEN))
long_now = st.session_state.get("var_long_len", variants.DEFAULT_LONG_LEN)
frame = variants.long_answer_frame(list(variants.DEFAULT_REWARDS), NAMES)
left, right = st.columns(2)
left.altair_chart(variants.long_answer_chart(frame, long_now, NAMES, "per_token"), key="var_long_per_token")
right.altair_chart(variants.long_answer_chart(frame, long_now, NAMES, "total"), key="var_long_total")
at_len = frame[frame["len"] == 8].set_index("variant")["per_token"]
st.markdown(t("var.long_result", chapter=at_len[NAMES["chapter"]], dr=at_len[NAMES["dr_grpo"]],
              dapo=at_len[NAMES["dapo"]], max_len=variants.MAX_LEN))

# --- groups with equal rewards -----------------------------------------------------------------------
st.header(t("var.zero_title"))
st.markdown(t("var.zero_intro"))
c1, c2 = st.columns([2, 1])
p = c1.slider(t("var.p"), 0.0, 1.0, 0.8, 0.05, key="var_p")
G = c2.select_slider(t("var.G"), [4, 8, 16], value=4, key="var_G")
frac = variants.zero_std_probability(p, G)
st.altair_chart(variants.zero_std_chart({"p": t("var.chart.p"), "frac": t("var.chart.frac"),
                                         "title": t("var.chart.zero_title")}, p), key="var_zero_chart")
st.markdown(t("var.zero_result", p=p, G=G, frac=frac) + ("" if lang() == "zh" else " ") + (
    t("var.zero_cost", cost=1 / (1 - frac)) if frac < 1 else t("var.zero_never")))

# --- advantage scale --------------------------------------------------------------------------------
st.header(t("var.scale_title"))
st.markdown(t("var.scale_intro"))
this = [float(r) for r in (group.rewards if source == "demo" and group is not None else variants.DEFAULT_REWARDS)]
right_other = st.slider(t("var.other_right"), 0, 4, 1, key="var_other_right")
other = [1.0] * right_other + [0.0] * (4 - right_other)
scale = variants.scale_table(this, other, NAMES)
st.dataframe(scale, hide_index=True, column_config={c: st.column_config.NumberColumn(format="%.3f")
                                                    for c in scale.columns if c.startswith("A · ")})
st.caption(t("var.scale_note"))

# --- quiz -----------------------------------------------------------------------------------------
st.header(t("var.quiz_title"))
for qid, n_options, right in quiz.VARIANT_QUESTIONS:
    with st.container(border=True):
        options = [t(f"quiz.{qid}.o{i + 1}") for i in range(n_options)]
        choice = st.radio(f"**{t(f'quiz.{qid}.q')}**", list(range(n_options)), index=None, key=f"quiz_{qid}",
                          format_func=options.__getitem__)
        verdict = quiz.is_right(qid, choice)
        if verdict is True:
            st.success(f"**{t('quiz.right')}** {t(f'quiz.{qid}.why')}")
        elif verdict is False:
            st.error(f"**{t('quiz.wrong', answer=t(f'quiz.{qid}.o{right + 1}'))}** {t(f'quiz.{qid}.why')}")
