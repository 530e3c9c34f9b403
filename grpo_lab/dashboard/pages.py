"""The dashboard's pages, once: each page's file in app_pages/, the address it is served at, its icon and
its title's text key. app.py builds the navigation from this table; a link to a page (`st.page_link`,
`st.switch_page`), and a test or bench that opens one, names it by `path`. No Streamlit here.
"""

from __future__ import annotations

from dataclasses import dataclass

FOLDER = "app_pages"


@dataclass(frozen=True)
class Page:
    address: str  # the url path ('' for Runs: Streamlit serves the default page at /)
    icon: str
    title: str  # its text key (locales/)


# page (its file's name in app_pages/, without .py) -> where and how it is shown; in the sidebar's order
TRAINING = {
    "runs": Page("", "🗂️", "nav.runs"),
    "live": Page("live", "📈", "nav.live"),
    "groups": Page("groups", "👥", "nav.groups"),
    "prompt_history": Page("prompt", "📜", "prompt_history.title"),
    "compare": Page("compare", "⚖️", "nav.compare"),
}
CONCEPTS = {
    "ppo_vs_grpo": Page("ppo-vs-grpo", "🏗️", "ppo.title"),
    "group_advantage": Page("group-advantage", "📊", "group.title"),
    "ratio_clip": Page("ratio-clip", "✂️", "clip.title"),
    "kl_divergence": Page("kl-divergence", "↔️", "kl.title"),
    "grpo_objective": Page("grpo-objective", "🧮", "obj.title"),
    "grpo_variants": Page("grpo-variants", "🧬", "var.title"),
    "quiz": Page("quiz", "❓", "quiz.title"),
}
PAGES = {**TRAINING, **CONCEPTS}


def path(page: str) -> str:
    """The page's file as Streamlit names it in a link (relative to app.py's folder).

    >>> path("groups")
    'app_pages/groups.py'
    """
    if page not in PAGES:
        raise KeyError(f"{page!r} is not a page of grpo_lab/dashboard/pages.py")
    return f"{FOLDER}/{page}.py"


def icon(page: str) -> str:
    """The page's icon, as the sidebar shows it and a link to the page repeats it."""
    return PAGES[page].icon
