"""The "start a training run" form: a preset's options (the demo's by default), validated before anything starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from grpo_lab.launching import form_checks, form_fields, launch_queue, launcher, presets
from grpo_lab.dashboard.i18n import per_language, t

# The form's main options, then those under "More options". Each option's label and help text are
# option.<name>.label and option.<name>.help (i18n.t): labels in dashboard/locales/, English help the
# trainer's own (grpo_lab/trainer/config.py, i18n.option_help), other languages' in their locale file.
MAIN = ["algo", "rewards", "group_size", "epsilon", "beta", "lr", "max_steps", "passes", "seed", "name"]
MORE = ["prompts_per_step", "sft_steps", "max_new_tokens", "temperature", "std_mode", "loss_aggregation",
        "epsilon_high", "eval_fraction", "eval_every", "measure_kl", "tools", "environment", "max_tool_calls",
        "mismatch_correction", "mismatch_cap", "mismatch_cap_min", "decode", "report_to"]


def demo_values(runs_dir: Path) -> dict[str, Any]:
    """The built-in demo run: every default, under the first free name of demo, demo-2, ..."""
    return {"name": launcher.free_name(runs_dir, "demo")}


def start(values: dict[str, Any], processes: int = 1) -> None:
    from grpo_lab.dashboard.reading import data  # noqa: PLC0415 - keeps this module importable without a runs folder

    try:
        name, pid = launcher.launch(values, data.runs_dir(), processes)
    except (form_checks.LaunchError, ValueError) as exc:
        st.error(t("launch.not_started", error=exc))
        return
    st.session_state["run"] = name
    st.session_state["runs_pick_next"] = name  # the Runs page selects it on its next run
    st.toast(t("launch.started", name=name, pid=pid) if pid else t("launch.queued", name=name, n=launch_queue.max_runs()))
    st.rerun(scope="app")


def _as_type(value: Any, default: Any) -> Any:
    """A preset's `beta: 0` is an int; the widget for a float option must still take decimals."""
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _limits(default: Any, bounds: Any) -> dict[str, Any]:
    """st.number_input's min_value / max_value: the trainer's bounds for the option, of the
    widget's type. An open end (lr in (0, 1]) is given as the end itself: submitting it gets the
    trainer's one line. A preset value outside the bounds keeps the widget unbounded, so that
    the form still opens and the refusal names the option."""
    if bounds is None or default not in bounds:
        return {}
    kind = type(default)
    return {"min_value": None if bounds.low is None else kind(bounds.low),
            "max_value": None if bounds.high is None else kind(bounds.high)}


def _widget(name: str, spec: dict[str, Any], preset: int, kind: str) -> Any:
    default, choices = spec["default"], spec["choices"]
    label, help_text = t(f"option.{name}.label"), t(f"option.{name}.help")
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
        return st.number_input(label, value=default, step=1, help=help_text, key=key,
                               **_limits(default, spec["bounds"]))
    if isinstance(default, float):
        fmt = "%.0e" if 0 < default < 1e-2 else "%.3g"
        return st.number_input(label, value=default, format=fmt, step=default / 10 if default else 0.01,
                               help=help_text, key=key, **_limits(default, spec["bounds"]))
    return st.text_input(label, "" if default is None else str(default), help=help_text, key=key)


# the fork form (fork_form.py) draws the same widgets
widget, as_type = _widget, _as_type


def form(runs_dir: Path) -> None:
    choices = presets.presets()
    shown = {c: t("launch.preset_demo") if c == presets.DEMO else c for c in choices}
    label = st.selectbox(t("launch.preset"), list(choices), key=per_language("launch_preset"),
                         help=t("launch.preset_help"), format_func=shown.get)
    preset = choices[label]
    if "error" in preset:
        st.error(preset["error"])
        return
    if missing := presets.missing_requirement(preset):
        st.warning(missing)
    number = list(choices).index(label)
    # The model and the task are chosen outside the form: the defaults of some options (learning
    # rate, warm start, completion length) follow them, and a form only reports its widgets when submitted.
    model = st.text_input(t("option.model.label"), str(preset.get("model", "tiny")), key=f"launch_{number}_model",
                          help=t("option.model.help")).strip() or "tiny"
    task_field = form_fields.config_fields(model)["task"]
    task = _widget("task", {**task_field, "default": preset.get("task", task_field["default"])}, number, "")
    fields = form_fields.config_fields(model, task)
    specs = {k: {**v, "default": _as_type(preset.get(k, v["default"]), v["default"])} for k, v in fields.items()}
    kind = "builtin" if model == "tiny" else "pretrained"
    if fields != form_fields.config_fields(model):
        kind += f"_{task}"  # widgets of their own: switching the task shows its defaults
    changed = [k for k, v in fields.items() if v["by_model"] and k not in preset]
    if changed:
        st.caption(t("launch.defaults_builtin" if kind.startswith("builtin") else "launch.defaults_pretrained",
                     options=", ".join(changed)))
    base = "demo" if not preset else str(preset.get("model", "run"))
    specs["name"]["default"] = launcher.free_name(runs_dir, base)
    with st.form("launch", border=False):
        values: dict[str, Any] = {"model": model, "task": task}
        cols = st.columns(4)
        for i, name in enumerate(MAIN):
            with cols[i % 4]:
                values[name] = _widget(name, specs[name], number, kind)
        with st.expander(t("launch.more")):
            cols = st.columns(4)
            for i, name in enumerate(MORE):
                with cols[i % 4]:
                    values[name] = _widget(name, specs[name], number, kind)
            with cols[len(MORE) % 4]:  # not a trainer option: how many processes torchrun starts
                processes = st.number_input(t("launch.processes"), min_value=1, max_value=form_checks.MAX_PROCESSES,
                                            value=1, step=1, help=t("launch.processes_help"),
                                            key=f"launch_{number}_processes")
            with cols[(len(MORE) + 1) % 4]:  # several seeds or a grid: a sweep (launching/sweep_queue.py), named by Name
                seeds = st.number_input(t("launch.seeds"), min_value=1, max_value=64, value=1, step=1,
                                        help=t("launch.seeds_help"), key=f"launch_{number}_seeds")
            with cols[(len(MORE) + 2) % 4]:
                over = st.text_input(t("launch.sweep_over"), "", help=t("launch.sweep_over_help"),
                                     placeholder="beta=0,0.04", key=f"launch_{number}_sweep_over")
        submitted = st.form_submit_button(t("launch.submit"), type="primary")
    if submitted:
        # options the preset sets but the form does not show (eval_prompts, ...) still apply
        values = {**preset, **{k: v for k, v in values.items() if v is not None and v != ""}}
        if int(seeds) > 1 or over.strip():
            start_sweep(values, int(seeds), over.strip(), int(processes))
        else:
            start(values, int(processes))


def start_sweep(values: dict[str, Any], seeds: int, over: str, processes: int = 1) -> None:
    """The form's Name as a sweep: seeds seed, seed+1, ... of every value in `over` (KEY=V1,V2)."""
    from grpo_lab.launching import sweep_queue
    from grpo_lab.dashboard.reading import data  # noqa: PLC0415 - as in start()
    from grpo_lab.launching.sweep_grid import SweepError

    first = int(values.get("seed") or 0)
    try:
        runs = sweep_queue.submit(str(values.get("name") or "sweep"), values, [over] if over else [],
                                  list(range(first, first + seeds)), data.runs_dir(), processes)
    except (SweepError, form_checks.LaunchError, ValueError) as exc:
        st.error(t("launch.not_started", error=exc))
        return
    st.session_state["run"] = runs[0].name
    st.toast(t("launch.sweep_started", name=runs[0].values["sweep"], n=len(runs)))
    st.rerun(scope="app")
