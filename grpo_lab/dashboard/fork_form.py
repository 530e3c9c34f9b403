"""Fork from step S (Live and Runs): which steps of a run can be forked, a button, and the launch form filled
with the parent's options; the trainer's `--fork-from NAME --fork-step S` does the rest (trainer/fork.py).

The run's family is said here too: the run it was forked from and the runs forked from it, with a link
that opens them on Compare (which draws a fork from its step on the parent's curve).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from grpo_lab.dashboard import launch_form, markup, pages
from grpo_lab.dashboard.i18n import t
from grpo_lab.dashboard.reading import data
from grpo_lab.launching import form_checks, form_fields, launcher
from grpo_lab.rundir import forks
from grpo_lab.rundir.reader import RunInfo

OPEN = "fork_open"  # session_state: (page, run, step) whose form is open


def family(info: RunInfo) -> None:
    """'Forked from P at step S' and 'Forks: a (step 3), b (step 6)', with a Compare link to all of them."""
    parent = forks.fork_of(info.config)
    kids = forks.children((r.name, r.config) for r in data.runs()).get(info.name, [])
    if parent is None and not kids:
        return
    lines = []
    if parent is not None:
        lines.append(t("fork.parent_line", parent=markup.md(parent[0]), step=parent[1]))  # run text: never markup
    if kids:
        lines.append(t("fork.children_line", children=", ".join(t("fork.child", name=markup.md(n), step=s)
                                                                for n, s in kids)))
    st.caption("  \n".join(lines))
    names = [*([parent[0]] if parent else []), info.name, *(n for n, _ in kids)]
    st.page_link(pages.path("compare"), label=t("fork.compare_family"), icon=pages.icon("compare"),
                 query_params={"runs": ",".join(names)})


def panel(info: RunInfo, where: str) -> None:
    """The steps that can be forked, a step chooser limited to them, "Fork from step S", and once
    pressed the launch form filled with the parent's options. `where`: the page (keys of its own)."""
    if info.config is None or info.get("source"):  # an imported run has no checkpoints of ours
        return
    steps = forks.forkable_steps(info.path)
    if not steps:
        st.caption(t("fork.no_steps"))
        return
    st.caption(t("fork.steps", steps=", ".join(map(str, steps))))
    left, right = st.columns([1, 2], vertical_alignment="bottom")
    step = left.selectbox(t("fork.step"), steps, index=len(steps) - 1, key=f"{where}_fork_step_{info.name}")
    if right.button(t("fork.button", step=step), key=f"{where}_fork_{info.name}"):
        st.session_state[OPEN] = (where, info.name, step)
    if st.session_state.get(OPEN) == (where, info.name, step):
        form(info, step, where)


def parent_values(config: dict[str, Any]) -> dict[str, Any]:
    """The form's starting values: the parent's options (as its config.json has them)."""
    return {k: v for k, v in config.items() if k in form_fields.config_fields()}


def form(info: RunInfo, step: int, where: str) -> None:
    """The launch form, every shown option at the parent's value; model, algorithm and LoRA shapes are the
    parent's (its checkpoint holds them), so they are not offered."""
    runs_dir = data.runs_dir()
    config = parent_values(info.config or {})
    model, task = str(config.get("model", "tiny")), str(config.get("task", "arithmetic"))
    fields = form_fields.config_fields(model, task)
    specs = {k: {**v, "default": launch_form.as_type(config.get(k, v["default"]), v["default"])}
             for k, v in fields.items()}
    specs["name"]["default"] = launcher.free_name(runs_dir, f"{info.name[:80]}-fork-{step}")
    if specs["max_steps"]["default"] <= step:  # forked at its last step: as many steps again as it had between checkpoints
        specs["max_steps"]["default"] = step + max(int(config.get("checkpoint_every") or 1), 1)
    shown = [n for n in launch_form.MAIN if n != "algo"]
    st.caption(t("fork.form_caption", parent=info.name, step=step, model=model, algo=config.get("algo", "grpo")))
    with st.form(f"{where}_fork_form", border=True):
        values: dict[str, Any] = {}
        cols = st.columns(4)
        for i, name in enumerate(shown):
            with cols[i % 4]:
                values[name] = launch_form.widget(name, specs[name], f"fork_{where}_{info.name}_{step}", "")
        with st.expander(t("launch.more")):
            cols = st.columns(4)
            for i, name in enumerate(launch_form.MORE):
                with cols[i % 4]:
                    values[name] = launch_form.widget(name, specs[name], f"fork_{where}_{info.name}_{step}", "")
        submitted = st.form_submit_button(t("fork.submit", step=step), type="primary")
    if submitted:
        given = {k: v for k, v in values.items() if v is not None and v != ""}
        world = info.get("world_size")
        launch_form.start({**given, "fork_from": info.name, "fork_step": step},
                          world if isinstance(world, int) and 1 <= world <= form_checks.MAX_PROCESSES else 1)
