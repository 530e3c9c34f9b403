"""Each room of launching/ imports on its own, in a fresh interpreter: none leans on another having been
imported first, and none is a shim that only passes names on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = ["form_fields", "form_checks", "commands", "launch_records", "process_control", "pending_launches",
           "launch_queue", "launcher"]


@pytest.mark.parametrize("module", MODULES)
def test_a_launching_module_imports_on_its_own(module):
    done = subprocess.run([sys.executable, "-c", f"import grpo_lab.launching.{module}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def test_no_launching_module_passes_on_the_names_of_keys():
    """keys.py's names are imported from keys.py itself (form_checks and the rest import only what they use)."""
    import ast

    from grpo_lab.launching import keys, launcher

    tree = ast.parse(Path(keys.__file__).read_text())
    own = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
    own |= {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    for module in MODULES:
        text = (ROOT / "grpo_lab" / "launching" / f"{module}.py").read_text()
        assert "noqa: F401" not in text, module
    assert not own & set(vars(launcher))
