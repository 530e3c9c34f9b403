"""The package's layers, lowest first: each imports only from layers below it (or its own), so the folders
show the data flow: the objective's math, the run directory, rewards and tools, the trainer, the commands
that work on finished runs, starting and queueing runs, the dashboard. Read from every module's import statements (function-level ones too)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "grpo_lab"
# a module's layer: its first part under grpo_lab (a package, or a top-level command module)
LAYERS = {
    "objective": 0,
    "rundir": 1,
    "rewards": 2, "tools": 2,
    "trainer": 3,
    "finished_runs": 4,
    "launching": 5,
    "dashboard": 6,
}


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "grpo_lab" and len(parts) > 1 else None


def imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


def upward() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        mine = layer_of(".".join(rel.parts))
        if mine not in LAYERS:
            continue
        for target in imports(path):
            theirs = layer_of(target)
            if theirs in LAYERS and LAYERS[theirs] > LAYERS[mine]:
                found.append(f"{rel}: {mine} imports {target} ({theirs})")
    return found


def test_every_module_has_a_layer():
    names = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.stem != "__init__")}
    assert names <= set(LAYERS), f"give these a layer: {sorted(names - set(LAYERS))}"


def test_no_module_imports_a_layer_above_its_own():
    assert upward() == []


def test_the_check_sees_an_upward_import(tmp_path):
    """The scan itself: a tools module importing the trainer is found, a function-level import too."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from grpo_lab.trainer.config import Config\n")
    assert imports(module) == ["grpo_lab.trainer.config"]
    assert LAYERS[layer_of("grpo_lab.trainer.config")] > LAYERS["tools"]


def test_the_readme_layout_names_every_folder_in_layer_order():
    """The README's tree is the map a newcomer reads: every package folder and command module is on it,
    listed lowest layer first, as the layer check above holds them."""
    readme = (PACKAGE.parent / "README.md").read_text()
    tree = readme[readme.index("grpo_lab/            the package"):]
    tree = tree[:tree.index("```")]
    listed = [line.split()[0].rstrip("/") for line in tree.splitlines()[1:]
              if line.startswith("  ") and not line.startswith("   ") and line.split()]
    packages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert sorted(set(listed) & set(LAYERS)) == packages, f"README tree lists {listed}"
    ranks = [LAYERS[name] for name in listed if name in LAYERS]
    assert ranks == sorted(ranks), f"README tree out of layer order: {listed}"


def test_the_tests_mirror_the_package():
    """A test file sits in the folder of the layer it tests; only package-wide checks stay at the top."""
    tests = PACKAGE.parent / "tests"
    folders = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    assert folders <= set(LAYERS), f"test folders that are no layer: {sorted(folders - set(LAYERS))}"
    top = sorted(p.name for p in tests.glob("test_*.py"))
    assert top == ["test_bench_gpu_vs_trl.py", "test_bench_sweep_stats.py", "test_doctests.py", "test_layers.py",
                   "test_package.py"], f"move these into their layer's folder: {top}"


# --- no import cycles -------------------------------------------------------------------------------


def modules_in(package: Path) -> dict[str, Path]:
    """Every module under `package` by its dotted name (a package by its __init__.py)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def module_imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of `known` that `path` imports, as `imports` reads statements (function-level and
    TYPE_CHECKING ones too): `from a.b import c` names module a.b.c when that is one, else a.b."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                    for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return out & set(known)


def import_cycles(package: Path) -> list[list[str]]:
    """The import cycles in `package`: its modules' strongly connected components of more than one
    module (Tarjan's algorithm over the graph of `module_imports`), each sorted.

    Importing a.b.c also runs a/__init__.py and a/b/__init__.py; those implied edges are left out, as
    a package's __init__ re-exporting its modules would otherwise make every package a cycle. A module's
    import of its own package (`from grpo_lab import rewards`) is an edge like any other."""
    known = modules_in(package)
    graph = {name: sorted(module_imports(path, known) - {name}) for name, path in known.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:  # node is the root of a component: it is what remains above it
            component = stack[stack.index(node):]
            del stack[stack.index(node):]
            if len(component) > 1:
                found.append(sorted(component))

    for name in graph:
        if name not in index:
            visit(name)
    return found


def test_no_import_cycle_is_left():
    """Two modules that import each other (directly or around a ring) cannot each be read, or loaded,
    without the other: move the function to the module that owns it."""
    cycles = import_cycles(PACKAGE)
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_check_sees_a_planted_cycle(tmp_path):
    """The scan itself: a function-level import back closes a cycle, and `from pkg import module` is an
    edge to that module."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def f():\n    from pkg.a import thing\n")
    (package / "c.py").write_text("import pkg.a\n")  # into the cycle, not part of it
    assert import_cycles(package) == [["pkg.a", "pkg.b"]]
    (package / "b.py").write_text("def f():\n    return 1\n")
    assert import_cycles(package) == []
