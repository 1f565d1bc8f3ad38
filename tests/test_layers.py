"""The dependency rule, checked (docs/design.md): loop's packages form layers that import only
downward (the `layers` contract in pyproject.toml, run by import-linter), no module takes part
in an import cycle (imports inside functions count: a deferred import is an edge all the same),
and no module imports another module's private (`_x`) names.

Each checker is also run on a small package built in tmp_path with the fault put in on
purpose, so a checker that silently passes everything would fail here."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

# -- the checkers ---------------------------------------------------------------------------
def lint_imports(folder: Path, config: Path) -> subprocess.CompletedProcess:
    """import-linter's verdict on the contracts in `config`, for packages found in `folder`."""
    env = {**os.environ, "PYTHONPATH": str(folder)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", str(config)],
                          cwd=folder, env=env, capture_output=True, text=True)


def module_cycles(package: str) -> list[list[str]]:
    """The strongly connected components of more than one module in `package`'s import graph
    (Tarjan), counting imports inside functions, not those under `if TYPE_CHECKING:`."""
    graph = grimp.build_graph(package, include_external_packages=False,
                              exclude_type_checking_imports=True, cache_dir=None)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(edges) + 100))
    try:
        for module in sorted(edges):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return found


def _module_name(path: Path, top: Path) -> str:
    parts = list(path.relative_to(top.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str, top: Path) -> bool:
    rel = Path(*name.split(".")[1:]) if "." in name else Path()
    base = top / rel
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def private_imports(top: Path) -> list[tuple[str, str, str]]:
    """(importer, module, name) for every private name a module of the package at `top`
    takes from another of its modules: `from pkg.x import _name`, or `x._name` where `x`
    is a module of the package bound by an import."""
    package = top.name
    found = []
    for path in sorted(top.rglob("*.py")):
        me = _module_name(path, top)
        tree = ast.parse(path.read_text(), str(path))
        modules: dict[str, str] = {}        # local name -> a module of the package
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                    and node.module.split(".")[0] == package:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if _is_module(full, top):
                        modules[alias.asname or alias.name] = full
                    elif _private(alias.name) and node.module != me:
                        found.append((me, node.module, alias.name))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == package and alias.asname:
                        modules[alias.asname] = alias.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in modules and _private(node.attr) \
                    and modules[node.value.id] != me:
                found.append((me, modules[node.value.id], node.attr))
    return sorted(set(found))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


# -- loop itself ----------------------------------------------------------------------------
def test_the_layers_contract_of_pyproject_holds():
    done = lint_imports(ROOT, ROOT / "pyproject.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 kept, 0 broken" in done.stdout


def test_no_module_takes_part_in_an_import_cycle():
    assert module_cycles("loop") == []


def test_no_module_imports_a_private_name_of_another():
    assert private_imports(ROOT / "loop") == []


# -- the checkers bite ----------------------------------------------------------------------
def _package(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    top = tmp_path / name
    for rel, text in {"__init__.py": "", **files}.items():
        (top / rel).parent.mkdir(parents=True, exist_ok=True)
        (top / rel).write_text(textwrap.dedent(text))
    return top


def _contract(tmp_path: Path, package: str) -> Path:
    config = tmp_path / "pyproject.toml"
    config.write_text(textwrap.dedent(f"""\
        [tool.importlinter]
        root_package = "{package}"
        exclude_type_checking_imports = true

        [[tool.importlinter.contracts]]
        name = "layers"
        type = "layers"
        layers = ["{package}.high", "{package}.low"]
        """))
    return config


def test_an_upward_import_inside_a_function_breaks_the_contract(tmp_path):
    _package(tmp_path, "upward", {
        "high/__init__.py": "", "high/top.py": "from upward.low import base\n",
        "low/__init__.py": "",
        "low/base.py": """\
            def later():
                from upward.high import top     # deferred: an edge all the same
                return top
            """,
    })
    done = lint_imports(tmp_path, _contract(tmp_path, "upward"))
    assert done.returncode != 0
    assert "upward.low.base -> upward.high.top" in done.stdout
    assert "0 kept, 1 broken" in done.stdout


def test_an_import_under_type_checking_does_not_break_it(tmp_path):
    _package(tmp_path, "typed", {
        "high/__init__.py": "", "high/top.py": "X = 1\n",
        "low/__init__.py": "",
        "low/base.py": """\
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from typed.high.top import X
            """,
    })
    done = lint_imports(tmp_path, _contract(tmp_path, "typed"))
    assert done.returncode == 0, done.stdout


def test_a_cycle_through_a_function_level_import_is_found(tmp_path, monkeypatch):
    _package(tmp_path, "circle", {
        "a.py": "from circle import b\n",
        "b.py": "def f():\n    from circle import c\n",
        "c.py": "import circle.a\n",
        "d.py": "from circle import a\n",      # imports into the cycle, not part of it
    })
    monkeypatch.syspath_prepend(str(tmp_path))
    assert module_cycles("circle") == [["circle.a", "circle.b", "circle.c"]]


def test_a_private_name_taken_from_another_module_is_found(tmp_path):
    top = _package(tmp_path, "leaky", {
        "a.py": "def _helper(): ...\ndef use(): return _helper()\n",
        "b.py": "from leaky.a import _helper, use\n",
        "c.py": "import leaky.a as a\nx = a._helper\n",
        "d.py": "from leaky import a\ny = a.use\n",        # public: fine
        "e.py": "from leaky.a import __doc__\n",          # a dunder is no private name
    })
    assert private_imports(top) == [("leaky.b", "leaky.a", "_helper"),
                                    ("leaky.c", "leaky.a", "_helper")]
