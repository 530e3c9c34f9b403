"""The prompt-history and Compare-completions pages' questions (rundir.prompt_history), cached
briefly per version of the samples table, as reading/queries.py caches the Groups page's."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from grpo_lab.dashboard.reading.data import runs_dir
from grpo_lab.dashboard.reading.queries import prompts, version
from grpo_lab.rundir.chat import prompt_key
from grpo_lab.rundir import prompt_history as ph
from grpo_lab.rundir.reader import run_path


@st.cache_data(ttl=30.0, max_entries=64, show_spinner=False)
def _draws(run: str, prompt_id: str, pass_at: float, v: tuple) -> tuple[pd.DataFrame, list[str]]:
    return ph.draws(run_path(runs_dir(), run), prompt_id, pass_at)


def draws(run: str, prompt_id: str, pass_at: float) -> tuple[pd.DataFrame, list[str]]:
    """Every draw of `prompt_id` in `run` (rundir.prompt_history.draws)."""
    return _draws(run, str(prompt_id), float(pass_at), version(run, "samples"))


@st.cache_data(ttl=30.0, max_entries=128, show_spinner=False)
def _completions(run: str, prompt_id: str, step: int, group: int, v: tuple) -> tuple[pd.DataFrame, list[str]]:
    return ph.completions(run_path(runs_dir(), run), prompt_id, step, group)


def completions(run: str, prompt_id: str, step: int, group: int) -> tuple[pd.DataFrame, list[str]]:
    """One draw's completions, by sample_idx."""
    return _completions(run, str(prompt_id), int(step), int(group), version(run, "samples"))


@st.cache_data(ttl=30.0, max_entries=32, show_spinner=False)
def _outcomes(run: str, pass_at: float, v: tuple) -> tuple[pd.DataFrame, list[str]]:
    return ph.outcomes(run_path(runs_dir(), run), pass_at)


def outcomes(run: str, pass_at: float) -> tuple[pd.DataFrame, list[str]]:
    """Per prompt of `run`: its draws, pass rates early and late, and its kind (learned, ...)."""
    return _outcomes(run, float(pass_at), version(run, "samples"))


def prompt_keys(run: str) -> tuple[dict[str, str], list[str]]:
    """(prompt_id -> what the prompt asks (rundir.chat.prompt_key: the user turns, without a chat template),
    problems met reading the samples)."""
    table, problems = prompts(run)
    if table.empty:
        return {}, problems
    return {str(i): prompt_key(str(p)) for i, p in zip(table["prompt_id"], table["prompt"])}, problems
