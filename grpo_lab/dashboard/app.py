"""GRPO / PPO lab: the Streamlit entry point. Pages live in app_pages/; this file only wires them."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

# `streamlit run .../grpo_lab/dashboard/app.py` puts dashboard/ on the path, not the folder that
# holds grpo_lab (a checkout; an installed package is importable anyway).
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from grpo_lab.dashboard import access, i18n  # noqa: E402
from grpo_lab.dashboard.i18n import t  # noqa: E402
from grpo_lab.dashboard.reading import data  # noqa: E402
from grpo_lab.rewards import sandbox  # noqa: E402

st.set_page_config(page_title="GRPO lab", page_icon="🧪", layout="wide")
st.set_option("client.toolbarMode", "minimal")  # no "Deploy" button: config.toml is read only from the cwd

PAGES = Path(__file__).parent / "app_pages"


def aliases(pages: list[st.Page], typed: dict[str, st.Page]) -> list[st.Page]:
    """Hidden pages at the addresses people type for a page (its name capitalised, /Live; and `typed`:
    /runs for Runs, which Streamlit serves at /), each sending the visitor on to the page with the
    address's query (?run=...). Streamlit matches an address exactly and says "Page not found" otherwise."""
    wanted = dict(typed)
    for page in pages:
        wanted.setdefault(page.url_path.capitalize(), page)
    taken = {page.url_path for page in pages}
    return [st.Page(functools.partial(_go_to, page), title=page.title, url_path=name, visibility="hidden")
            for name, page in wanted.items() if name and name not in taken]


def _go_to(page: st.Page) -> None:
    st.switch_page(page, query_params=st.query_params.to_dict())


# Titles follow the language switch (the switch stores the choice before this rerun); addresses do not.
# Runs, the default page, is served at / (its url_path is ignored by Streamlit): /runs is an alias.
runs = st.Page(PAGES / "runs.py", title=t("nav.runs"), icon="🗂️", default=True, url_path="")
training = [
    runs,
    st.Page(PAGES / "live.py", title=t("nav.live"), icon="📈", url_path="live"),
    st.Page(PAGES / "groups.py", title=t("nav.groups"), icon="👥", url_path="groups"),
    st.Page(PAGES / "prompt_history.py", title=t("prompt_history.title"), icon="📜", url_path="prompt"),
    st.Page(PAGES / "compare.py", title=t("nav.compare"), icon="⚖️", url_path="compare"),
]
concepts = [
    st.Page(PAGES / "ppo_vs_grpo.py", title=t("ppo.title"), icon="🏗️", url_path="ppo-vs-grpo"),
    st.Page(PAGES / "group_advantage.py", title=t("group.title"), icon="📊", url_path="group-advantage"),
    st.Page(PAGES / "ratio_clip.py", title=t("clip.title"), icon="✂️", url_path="ratio-clip"),
    st.Page(PAGES / "kl_divergence.py", title=t("kl.title"), icon="↔️", url_path="kl-divergence"),
    st.Page(PAGES / "grpo_objective.py", title=t("obj.title"), icon="🧮", url_path="grpo-objective"),
    st.Page(PAGES / "grpo_variants.py", title=t("var.title"), icon="🧬", url_path="grpo-variants"),
    st.Page(PAGES / "quiz.py", title=t("quiz.title"), icon="❓", url_path="quiz"),
]
typed = {"runs": runs, "Runs": runs, "home": runs, "prompt-history": training[3]}
navigation = st.navigation({
    t("nav.training"): training + aliases(training + concepts, typed),
    t("nav.concepts"): concepts,
})

access.gate()  # a visitor from another machine needs the token
# rewards built in this process (the rescore form) start no interpreter the launch form would refuse
sandbox.set_program_check(lambda python: access.check_program(python, data.runs_dir()))

# --- sidebar: the language switch (every page follows it) --------------------------------------
with st.sidebar:
    i18n.language_switch()

navigation.run()
