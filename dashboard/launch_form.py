"""The "start a training run" form: a preset's options (the demo's by default), validated before anything starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from dashboard import launcher, presets

# (option, label) of the form's main fields, then those under "More options".
MAIN = [("algo", "Algorithm"), ("task", "Task"), ("rewards", "Rewards (name=weight, ...)"),
        ("group_size", "G (responses per prompt)"), ("epsilon", "epsilon (clip range)"), ("beta", "beta (KL weight)"),
        ("lr", "Learning rate"), ("max_steps", "Steps"), ("passes", "Passes per batch"), ("seed", "Seed"),
        ("name", "Run name")]
MORE = [("prompts_per_step", "Prompts per step"), ("sft_steps", "Warm-start SFT steps"),
        ("max_new_tokens", "Max new tokens"), ("temperature", "Temperature"), ("std_mode", "Advantage std"),
        ("loss_aggregation", "Loss aggregation"), ("epsilon_high", "epsilon_high (blank: = epsilon)"),
        ("eval_fraction", "Held-out fraction"), ("eval_every", "Evaluate every N steps")]


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


def _as_type(value: Any, default: Any) -> Any:
    """A preset's `beta: 0` is an int; the widget for a float option must still take decimals."""
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _widget(name: str, label: str, spec: dict[str, Any], preset: int, kind: str) -> Any:
    default, help_text, choices = spec["default"], spec["help"], spec["choices"]
    # per preset (and per kind of model for model-dependent options): switching shows their values
    key = f"launch_{preset}_{kind}_{name}" if spec["by_model"] else f"launch_{preset}_{name}"
    if choices:
        return st.selectbox(label, list(choices), index=list(choices).index(default), help=help_text, key=key)
    if name == "rewards":
        text = default if isinstance(default, str) else ",".join(f"{k}={v:g}" for k, v in default.items())
        return st.text_input(label, text, help=help_text, key=key)
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
    choices = presets.presets()
    label = st.selectbox("Preset", list(choices), key="launch_preset",
                         help="Starting values for the form. Each YAML file in configs/ is a preset "
                              "(python -m trainer --config FILE runs the same).")
    preset = choices[label]
    if "error" in preset:
        st.error(preset["error"])
        return
    if missing := presets.missing_requirement(preset):
        st.warning(missing)
    number = list(choices).index(label)
    # The model is chosen outside the form: its options' defaults (learning rate, warm start,
    # completion length) follow it, and a form only reports its widgets when submitted.
    model = st.text_input("Model", str(preset.get("model", "tiny")), key=f"launch_{number}_model",
                          help=launcher.config_fields()["model"]["help"]).strip() or "tiny"
    fields = launcher.config_fields(model)
    specs = {k: {**v, "default": _as_type(preset.get(k, v["default"]), v["default"])} for k, v in fields.items()}
    kind = "builtin" if model == "tiny" else "pretrained"
    changed = [k for k, v in fields.items() if v["by_model"] and k not in preset]
    if changed:
        st.caption(f"{', '.join(changed)}: the defaults for {'the built-in' if kind == 'builtin' else 'a pretrained'} "
                   "model (they change with the model).")
    base = "demo" if not preset else str(preset.get("model", "run"))
    specs["name"]["default"] = launcher.free_name(runs_dir, base)
    with st.form("launch", border=False):
        values: dict[str, Any] = {"model": model}
        cols = st.columns(4)
        for i, (name, label) in enumerate(MAIN):
            with cols[i % 4]:
                values[name] = _widget(name, label, specs[name], number, kind)
        with st.expander("More options"):
            cols = st.columns(4)
            for i, (name, label) in enumerate(MORE):
                with cols[i % 4]:
                    values[name] = _widget(name, label, specs[name], number, kind)
        submitted = st.form_submit_button("Start training", type="primary")
    if submitted:
        # options the preset sets but the form does not show (eval_prompts, ...) still apply
        start({**preset, **{k: v for k, v in values.items() if v is not None and v != ""}})
