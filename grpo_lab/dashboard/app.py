"""GRPO / PPO lab: the Streamlit entry point. Pages live in app_pages/; this file only wires them."""

from __future__ import annotations

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

# Titles follow the language switch (the switch stores the choice before this rerun); addresses do not.
navigation = st.navigation({
    t("nav.training"): [
        st.Page(PAGES / "runs.py", title=t("nav.runs"), icon="🗂️", default=True, url_path="runs"),
        st.Page(PAGES / "live.py", title=t("nav.live"), icon="📈", url_path="live"),
        st.Page(PAGES / "groups.py", title=t("nav.groups"), icon="👥", url_path="groups"),
        st.Page(PAGES / "prompt_history.py", title=t("prompt_history.title"), icon="📜", url_path="prompt"),
        st.Page(PAGES / "compare.py", title=t("nav.compare"), icon="⚖️", url_path="compare"),
    ],
    t("nav.concepts"): [
        st.Page(PAGES / "ppo_vs_grpo.py", title=t("ppo.title"), icon="🏗️", url_path="ppo-vs-grpo"),
        st.Page(PAGES / "group_advantage.py", title=t("group.title"), icon="📊", url_path="group-advantage"),
        st.Page(PAGES / "ratio_clip.py", title=t("clip.title"), icon="✂️", url_path="ratio-clip"),
        st.Page(PAGES / "kl_divergence.py", title=t("kl.title"), icon="↔️", url_path="kl-divergence"),
        st.Page(PAGES / "grpo_objective.py", title=t("obj.title"), icon="🧮", url_path="grpo-objective"),
        st.Page(PAGES / "grpo_variants.py", title=t("var.title"), icon="🧬", url_path="grpo-variants"),
        st.Page(PAGES / "quiz.py", title=t("quiz.title"), icon="❓", url_path="quiz"),
    ],
})

access.gate()  # a visitor from another machine needs the token
# rewards built in this process (the rescore form) start no interpreter the launch form would refuse
sandbox.set_program_check(lambda python: access.check_program(python, data.runs_dir()))

# --- sidebar: the language switch (every page follows it) --------------------------------------
with st.sidebar:
    i18n.language_switch()

navigation.run()
