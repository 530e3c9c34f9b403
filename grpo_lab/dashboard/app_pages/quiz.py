"""Quiz: the chapter's five questions, with feedback and the explanation as soon as one is answered."""

import streamlit as st

from grpo_lab.dashboard.concepts import quiz
from grpo_lab.dashboard.i18n import t

st.title(t("quiz.title"))
st.markdown(t("quiz.intro"))


def _reset() -> None:
    for qid, _, _ in quiz.QUESTIONS:
        st.session_state[f"quiz_{qid}"] = None


answers = {}
for qid, n_options, right in quiz.QUESTIONS:
    with st.container(border=True):
        options = [t(f"quiz.{qid}.o{i + 1}") for i in range(n_options)]
        choice = st.radio(f"**{t(f'quiz.{qid}.q')}**", list(range(n_options)), index=None, key=f"quiz_{qid}",
                          format_func=options.__getitem__)
        answers[qid] = choice
        verdict = quiz.is_right(qid, choice)
        if verdict is True:
            st.success(f"**{t('quiz.right')}** {t(f'quiz.{qid}.why')}")
        elif verdict is False:
            st.error(f"**{t('quiz.wrong', answer=t(f'quiz.{qid}.o{right + 1}'))}** {t(f'quiz.{qid}.why')}")

right_count, answered = quiz.score(answers)
if answered:
    st.markdown("#### " + t("quiz.score", right=right_count, total=len(quiz.QUESTIONS), answered=answered))
    st.button(t("quiz.reset"), on_click=_reset, key="quiz_reset")
