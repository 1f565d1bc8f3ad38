"""The suite's own rules, read from its source with ast: a test module never imports another
test module (what several share lives in conftest.py, helpers.py or a named helper module
such as llm_task.py), at the top or inside a function."""
from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported_modules(source: str) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in `source`, wherever it stands."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def imports_of_test_modules(source: str) -> list[str]:
    """`line: module` for each import of a test module (test_*) in `source`."""
    return [f"{line}: {module}" for line, module in imported_modules(source)
            if module.split(".")[0].startswith("test_")]


def test_no_test_module_imports_another():
    offences = [f"{path.name}:{where}" for path in sorted(TESTS.glob("*.py"))
                for where in imports_of_test_modules(path.read_text())]
    assert offences == [], ("import these from helpers.py (or conftest.py), not from a test "
                            "module: " + ", ".join(offences))


def test_the_check_sees_imports_at_the_top_and_inside_functions():
    source = ("import os\nfrom test_engine import rows\n"
              "def f():\n    import test_story\n    from helpers import rows\n")
    assert imports_of_test_modules(source) == ["2: test_engine", "4: test_story"]
