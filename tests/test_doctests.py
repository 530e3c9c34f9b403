"""Every docstring example in the package runs: the chapter's numbers in the docs stay true."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "grpo_lab"
WITH_EXAMPLES = sorted(p for p in PACKAGE.rglob("*.py") if ">>> " in p.read_text(encoding="utf-8"))


def _module(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)


def test_the_objective_and_config_modules_have_examples():
    names = {_module(p) for p in WITH_EXAMPLES}
    assert {"grpo_lab.objective.functions", "grpo_lab.trainer.config", "grpo_lab.objective.options"} <= names


@pytest.mark.parametrize("path", WITH_EXAMPLES, ids=_module)
def test_docstring_examples_run(path):
    result = doctest.testmod(importlib.import_module(_module(path)), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, f"{_module(path)}: {result.failed} failed"
