"""The "start a training run" form: the demo run's defaults, validated before anything starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from dashboard import launcher

# (option, label) of the form's main fields, then those under "More options".
MAIN = [("algo", "Algorithm"), ("model", "Model"), ("task", "Task"), ("rewards", "Rewards (name=weight, ...)"),
        ("group_size", "G (responses per prompt)"), ("epsilon", "epsilon (clip range)"), ("beta", "beta (KL weight)"),
        ("lr", "Learning rate"), ("max_steps", "Steps"), ("passes", "Passes per batch"), ("seed", "Seed"),
        ("name", "Run name")]
MORE = [("prompts_per_step", "Prompts per step"), ("sft_steps", "Warm-start SFT steps"),
        ("max_new_tokens", "Max new tokens"), ("temperature", "Temperature"), ("std_mode", "Advantage std"),
        ("loss_aggregation", "Loss aggregation"), ("epsilon_high", "epsilon_high (blank: = epsilon)")]


def demo_values(runs_dir: Path) -> dict[str, Any]:
    """The built-in demo run: every default, under the first free name of demo, demo-2, ..."""
    return {"name": launcher.free_name(runs_dir, "demo")}


def start(values: dict[str, Any]) -> None:
    from dashboard import data  # noqa: PLC0415 - keeps this module importable without a runs folder

    try:
        name, pid = launcher.launch(values, data.runs_dir())
    except (launcher.LaunchError, ValueError) as exc:
        st.error(f"Not started: {exc}")
        return
    st.session_state["run"] = name
    st.session_state["runs_pick_next"] = name  # the Runs page selects it on its next run
    st.toast(f"Started {name} (pid {pid}).")
    st.rerun(scope="app")


def _widget(name: str, label: str, spec: dict[str, Any]) -> Any:
    default, help_text, choices = spec["default"], spec["help"], spec["choices"]
    key = f"launch_{name}"
    if choices:
        return st.selectbox(label, list(choices), index=list(choices).index(default), help=help_text, key=key)
    if name == "rewards":
        return st.text_input(label, ",".join(f"{k}={v:g}" for k, v in default.items()), help=help_text, key=key)
    if isinstance(default, bool):
        return st.checkbox(label, default, help=help_text, key=key)
    if isinstance(default, int):
        return st.number_input(label, value=default, step=1, help=help_text, key=key)
    if isinstance(default, float):
        fmt = "%.0e" if 0 < default < 1e-2 else "%.3g"
        return st.number_input(label, value=default, format=fmt, step=default / 10 if default else 0.01,
                               help=help_text, key=key)
    return st.text_input(label, "" if default is None else str(default), help=help_text, key=key)


def form(runs_dir: Path) -> None:
    specs = dict(launcher.config_fields())  # a copy: the cached one is shared
    specs["name"] = {**specs["name"], "default": launcher.free_name(runs_dir, "demo")}
    with st.form("launch", border=False):
        values: dict[str, Any] = {}
        cols = st.columns(4)
        for i, (name, label) in enumerate(MAIN):
            with cols[i % 4]:
                values[name] = _widget(name, label, specs[name])
        with st.expander("More options"):
            cols = st.columns(4)
            for i, (name, label) in enumerate(MORE):
                with cols[i % 4]:
                    values[name] = _widget(name, label, specs[name])
        submitted = st.form_submit_button("Start training", type="primary")
    if submitted:
        start({k: v for k, v in values.items() if v is not None and v != ""})
