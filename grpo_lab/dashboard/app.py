"""GRPO / PPO lab: the Streamlit entry point. The pages are listed in pages.py, their files in app_pages/; this
file only wires them."""

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

from grpo_lab.dashboard import access, i18n, pages  # noqa: E402
from grpo_lab.launching import allowed  # noqa: E402
from grpo_lab.dashboard.i18n import t  # noqa: E402
from grpo_lab.dashboard.reading import data  # noqa: E402
from grpo_lab.rewards import sandbox  # noqa: E402

st.set_page_config(page_title="GRPO lab", page_icon="🧪", layout="wide")
st.set_option("client.toolbarMode", "minimal")  # no "Deploy" button: config.toml is read only from the cwd

PAGES = Path(__file__).parent / pages.FOLDER


def aliases(pages: dict[str, st.Page], typed: dict[str, st.Page]) -> list[st.Page]:
    """Hidden pages at the addresses people type for a page (`pages`: its address -> the page; the
    address capitalised, /Live, and `typed`: /runs for Runs, which Streamlit serves at /), each
    sending the visitor on to the page with the address's query (?run=...). Streamlit matches an
    address exactly and says "Page not found" otherwise. (Built from the addresses given, never read
    back from a Page: a process that imports this file outside Streamlit, as multiprocessing's spawn
    does with the last script run, gets Pages with nothing set.)"""
    wanted = {**{path.capitalize(): page for path, page in pages.items()}, **typed}
    return [st.Page(functools.partial(_go_to, page), title=name, url_path=name, visibility="hidden")
            for name, page in wanted.items() if name and name not in pages]


def _go_to(page: st.Page) -> None:
    st.switch_page(page, query_params=st.query_params.to_dict())


def served(table: dict[str, pages.Page]) -> dict[str, st.Page]:
    """Each page of `table` (pages.py) by its address, as a Streamlit page of app_pages/."""
    return {p.address: st.Page(PAGES / f"{name}.py", title=t(p.title), icon=p.icon, url_path=p.address,
                               default=name == "runs") for name, p in table.items()}


i18n.from_address()  # ?lang=zh: before the first text (the pages' titles)
# Titles follow the language switch (the switch stores the choice before this rerun); addresses do not.
# Runs, the default page, is served at / (Streamlit ignores a default page's url_path): /runs is an alias.
training = served(pages.TRAINING)
concepts = served(pages.CONCEPTS)
runs = training[pages.TRAINING["runs"].address]
typed = {"runs": runs, "Runs": runs, "home": runs, "prompt-history": training[pages.TRAINING["prompt_history"].address]}
navigation = st.navigation({
    t("nav.training"): [*training.values(), *aliases({**training, **concepts}, typed)],
    t("nav.concepts"): list(concepts.values()),
})

access.gate()  # a visitor from another machine needs the token
# rewards built in this process (the rescore form) start no interpreter the launch form would refuse
sandbox.set_program_check(lambda python: allowed.check_program(python, data.runs_dir()))

# --- sidebar: the language switch (every page follows it) --------------------------------------
with st.sidebar:
    i18n.language_switch()

navigation.run()
