"""The dashboard's text in every language, and the sidebar language switch.

The text lives in dashboard/locales/<code>.yaml, one file per language, each a flat mapping
key -> text with the same keys: a translator edits those files and never opens code, and a third
language is one more file (its `language.name` is what the switch shows). The trainer options' English
help is not in en.yaml: it is the trainer's own (trainer/config.py, `option_help`). tests/dashboard/test_i18n.py
checks that every file has the same keys and placeholders, and that every key the code asks for exists.

`t("group.title")` returns the text in the chosen language; the choice lives in
st.session_state["lang"] and, for a language other than English, in the address (?lang=zh), so a
reload, a shared link or a typed address keeps it (`from_address`); it defaults to English when `language_switch()` was never called (a page
run on its own, as in tests). Placeholders use str.format: t("x", n=3). A key that English lacks
is a bug and raises KeyError; a key only a newer English file has shows in English.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import streamlit as st
import yaml

from grpo_lab.trainer.config import Config

LOCALES = Path(__file__).resolve().parent / "locales"
DEFAULT = "en"
STATE_KEY = "lang"
_WIDGET_KEY = "lang_switch"


@functools.cache
def file_texts(code: str) -> dict[str, str]:
    """The texts language `code`'s file holds, read once per process."""
    path = LOCALES / f"{code}.yaml"
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(loaded, dict):
        raise ValueError(f"{path}: expected a mapping of key: \"text\" lines")
    wrong = [k for k, v in loaded.items() if not isinstance(k, str) or not isinstance(v, str)]
    if wrong:
        raise ValueError(f"{path}: these keys do not map to a quoted text: {', '.join(map(str, wrong[:5]))}")
    return loaded


def option_help(english: dict[str, str]) -> dict[str, str]:
    """option.<name>.help for each trainer option the dashboard labels (option.<name>.label in `english`):
    the trainer's own help text (grpo_lab/trainer/config.py, its --help), written there once. Another
    language's file translates it under the same key."""
    labelled = {key[len("option."):-len(".label")] for key in english
                if key.startswith("option.") and key.endswith(".label")}
    return {f"option.{f.name}.help": f.metadata["help"] for f in dataclasses.fields(Config)
            if f.name in labelled and "help" in f.metadata}


@functools.cache
def texts(code: str) -> dict[str, str]:
    """Every text of language `code`: its file's, and for English the trainer options' help (option_help)."""
    own = file_texts(code)
    return {**own, **option_help(own)} if code == DEFAULT else own


def _languages() -> dict[str, str]:
    codes = sorted((p.stem for p in LOCALES.glob("*.yaml")), key=lambda c: (c != DEFAULT, c))
    return {code: texts(code).get("language.name", code) for code in codes}


LANGUAGES = _languages()  # code -> the language's own name, English first


def lang() -> str:
    value = st.session_state.get(STATE_KEY, DEFAULT)
    return value if value in LANGUAGES else DEFAULT


def t(key: str, **values: object) -> str:
    """The text of `key` in the current language; KeyError when no language file has it."""
    text = texts(lang()).get(key)
    if text is None:
        if key not in texts(DEFAULT):
            raise KeyError(f"no text {key!r} in {LOCALES / DEFAULT}.yaml")
        text = texts(DEFAULT)[key]
    return text.format(**values) if values else text


def per_language(key: str) -> str:
    """The key of a selectbox or multiselect whose options are shown translated, one per language.

    After a language switch, Streamlit's browser side keeps showing the label a kept selectbox
    showed before (the English "final reward" on the Chinese page); a widget of its own per
    language draws the new labels. The choice carries over from the language last used.
    """
    mine = f"{key}@{lang()}"
    if mine not in st.session_state:
        for code in LANGUAGES:
            if f"{key}@{code}" in st.session_state:
                st.session_state[mine] = st.session_state[f"{key}@{code}"]
                break
    return mine


def from_address() -> None:
    """The language the address names (?lang=zh) becomes the session's; an address without one gets
    the session's (a page link carries only its own query), English never written. Call at the start
    of every run, before any text is drawn (app.py)."""
    asked = st.query_params.get(STATE_KEY)
    if asked in LANGUAGES:
        st.session_state[STATE_KEY] = asked
    elif lang() != DEFAULT:
        st.query_params[STATE_KEY] = lang()


def language_switch() -> str:
    """A language selector in the sidebar; returns the chosen code. Call once per run, in app.py."""
    def _store() -> None:
        st.session_state[STATE_KEY] = st.session_state[_WIDGET_KEY]
        if lang() == DEFAULT:
            st.query_params.pop(STATE_KEY, None)
        else:
            st.query_params[STATE_KEY] = lang()

    codes = list(LANGUAGES)
    st.sidebar.radio("Language / 语言", codes, index=codes.index(lang()), format_func=LANGUAGES.__getitem__,
                     key=_WIDGET_KEY, horizontal=True, on_change=_store)
    return lang()
